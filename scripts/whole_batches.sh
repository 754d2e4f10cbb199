#!/usr/bin/env bash
# Whole passes priced as ranges (BENCHMARKS.md "Whole passes priced as ranges"): `load --batch
# B` and `check --batch B` of ITEMS new items into a go-zero filter of each size in BITS
# (default 4 MiB and 1 MiB), with BASE and NEW alternating, ROUNDS rounds, against one private
# redis-server (FLUSHALL before each load). Prints each run's seconds. With FLAGS set (e.g.
# FLAGS="--counting --capacity 1000000 --fpr 0.01"), those filter flags instead of each --bits.
# Usage: scripts/whole_batches.sh BASE_BIN NEW_BIN [ROUNDS] [ITEMS] [BATCHES] [BITS]
#   (ROUNDS default 2; ITEMS 300000; BATCHES "2000 5000 10000 20000"; BITS "33554432 8388608")
set -euo pipefail
base=$1 new=$2 rounds=${3:-2} items_n=${4:-300000} batches=${5:-"2000 5000 10000 20000"}
sizes=${6:-"33554432 8388608"}
. "$(dirname "$0")/private_redis.sh"
items=$(mktemp)
trap 'rm -f "$items"; cli shutdown nosave >/dev/null 2>&1 || true' EXIT
seq "$items_n" | sed 's/^/w:/' > "$items"
[ -n "${FLAGS:-}" ] && sizes=flags
for bits in $sizes; do
    if [ -n "${FLAGS:-}" ]; then
        # shellcheck disable=SC2206 # FLAGS is a list of words.
        flags=(--url "redis://127.0.0.1:$port" --key p $FLAGS --json)
    else
        flags=(--url "redis://127.0.0.1:$port" --key p --bits "$bits" --json)
    fi
    for b in $batches; do
        for round in $(seq "$rounds"); do
            line="${FLAGS:-bits $bits} batch $b round $round:"
            for which in base new; do
                bin=$base
                [ "$which" = new ] && bin=$new
                cli flushall > /dev/null
                load=$("$bin" "${flags[@]}" load --batch "$b" "$items" | seconds)
                check=$("$bin" "${flags[@]}" check --batch "$b" "$items" | seconds)
                line+=" $which load $load check $check;"
            done
            echo "$line"
        done
    done
done
