#!/usr/bin/env bash
# Growing checks read whole (BENCHMARKS.md "Growing checks read whole"): `check` of 1,000,000
# items (500,000 added, 500,000 not) against a growing filter (--growth 2 --fpr 0.001) of each
# capacity in CAPACITIES, with BASE and NEW alternating, ROUNDS rounds, at each batch size in
# BATCHES ("default": the CLI's own, 100,000 for a growing filter), against one private
# redis-server. The filter is loaded once per capacity (by NEW). Prints each run's seconds.
# Usage: scripts/growing_checks.sh BASE_BIN NEW_BIN [ROUNDS] [CAPACITIES] [BATCHES]
#   (ROUNDS default 3; CAPACITIES default "2000000 10000000"; BATCHES default "default 50000")
set -euo pipefail
base=$1 new=$2 rounds=${3:-3} capacities=${4:-"2000000 10000000"} batches=${5:-"default 50000"}
. "$(dirname "$0")/private_redis.sh"
added=$(mktemp) checked=$(mktemp)
trap 'rm -f "$added" "$checked"; cli shutdown nosave >/dev/null 2>&1 || true' EXIT
seq 500000 | sed 's/^/in:/' > "$added"
{ cat "$added"; seq 500000 | sed 's/^/out:/'; } > "$checked"
for cap in $capacities; do
    cli flushall > /dev/null
    flags=(--url "redis://127.0.0.1:$port" --key g --capacity "$cap" --fpr 0.001 --growth 2 --json)
    "$new" "${flags[@]}" load "$added" > /dev/null
    for b in $batches; do
        batch=()
        [ "$b" != default ] && batch=(--batch "$b")
        for round in $(seq "$rounds"); do
            line="capacity $cap batch $b round $round:"
            for which in base new; do
                bin=$base
                [ "$which" = new ] && bin=$new
                line+=" $which $("$bin" "${flags[@]}" check "${batch[@]}" "$checked" | seconds) s"
            done
            echo "$line"
        done
    done
done
