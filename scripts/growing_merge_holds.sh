#!/usr/bin/env bash
# How long a growing filter's dense merges hold the server (BENCHMARKS.md "The growing merge's
# BITOP asked of the ACL"): `load` of ITEMS new items into `--growth 2 --fpr 0.001` filters of
# each first-level capacity in CAPACITIES, with BASE and NEW alternating, ROUNDS rounds, against
# one private redis-server (FLUSHALL and SCRIPT FLUSH before each load; SLOWLOG of every
# command over 1 ms). Prints each load's seconds, the server's CPU seconds (INFO cpu), and the
# merge scripts' (EVAL) and their BITOPs' count, median, max and sum of ms from SLOWLOG.
# Usage: scripts/growing_merge_holds.sh BASE_BIN NEW_BIN [ROUNDS] [ITEMS] [CAPACITIES]
#   (ROUNDS default 3; ITEMS 1000000; CAPACITIES "3000000 6000000")
set -euo pipefail
base=$1 new=$2 rounds=${3:-3} items_n=${4:-1000000} capacities=${5:-"3000000 6000000"}
. "$(dirname "$0")/private_redis.sh"
items=$(mktemp)
trap 'rm -f "$items"; cli shutdown nosave >/dev/null 2>&1 || true' EXIT
seq "$items_n" | sed 's/^/g:/' > "$items"
cli config set slowlog-log-slower-than 1000 > /dev/null
cli config set slowlog-max-len 10000 > /dev/null
# The SLOWLOG's entries of COMMAND (lower case): count, median, max and sum of ms.
holds() {
    cli slowlog get 10000 | python3 -c '
import sys
command, lines = sys.argv[1], sys.stdin.read().split("\n")
# redis-cli prints each entry as: id, timestamp, microseconds, then the arguments.
took = [int(lines[i + 2]) / 1000 for i in range(len(lines) - 3)
        if lines[i + 3].lower() == command and lines[i + 2].isdigit() and lines[i + 1].isdigit()]
took.sort()
if took:
    print(f"{command} n={len(took)} median={took[len(took) // 2]:.1f} max={took[-1]:.1f} sum={sum(took):.0f} ms")
else:
    print(f"{command} n=0")
' "$1"
}
for capacity in $capacities; do
    for round in $(seq "$rounds"); do
        for which in base new; do
            bin=$base
            [ "$which" = new ] && bin=$new
            cli flushall > /dev/null
            cli script flush > /dev/null
            cli slowlog reset > /dev/null
            before=$(cpu)
            load=$("$bin" --url "redis://127.0.0.1:$port" --key g --growth 2 --capacity "$capacity" \
                --fpr 0.001 --json load "$items" | seconds)
            after=$(cpu)
            echo "capacity $capacity round $round $which: load $load s, server CPU $(echo "$after - $before" | bc) s; $(holds eval); $(holds bitop)"
        done
    done
done
