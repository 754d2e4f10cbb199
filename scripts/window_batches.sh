#!/usr/bin/env bash
# Window batches by ranges (BENCHMARKS.md "Window batches by ranges"): `load --batch B` and
# `check --batch B` of ITEMS new items into a window filter (--window 3m: generations of 60 s,
# 4 live; --fpr 0.001; CAP, default 10,000,000: generations of 19.5 MB) with BASE and NEW,
# alternating, for each batch size, against one private redis-server. First the three older
# generations are filled (1,000,000 other items each, one per generation: about 3 minutes of
# waiting), so that the runs meet a filter in its steady state; FRESH=1 skips that (only the
# current generation exists, FLUSHALL before each run). Prints each run's seconds.
# Usage: scripts/window_batches.sh BASE_BIN NEW_BIN [ITEMS] [BATCHES]
#   (ITEMS default 300000; BATCHES default "15000 20000 30000")
set -euo pipefail
base=$1 new=$2 items_n=${3:-300000} batches=${4:-"15000 20000 30000"}
. "$(dirname "$0")/private_redis.sh"
items=$(mktemp) other=$(mktemp)
trap 'rm -f "$items" "$other"; cli shutdown nosave >/dev/null 2>&1 || true' EXIT
flags=(--url "redis://127.0.0.1:$port" --key w --window 3m --capacity "${CAP:-10000000}" --fpr 0.001 --json)
epoch() { cli time | head -1 | python3 -c 'import sys; print(int(sys.stdin.read()) // 60)'; }
if [ -z "${FRESH:-}" ]; then
    for g in 1 2 3; do
        e=$(epoch)
        seq 1000000 | sed "s/^/q$g:/" > "$other"
        "$base" "${flags[@]}" load "$other" > /dev/null
        while [ "$(epoch)" = "$e" ]; do sleep 0.5; done
    done
fi
round=0
for b in $batches; do
    for which in base new; do
        bin=$base
        [ "$which" = new ] && bin=$new
        [ -n "${FRESH:-}" ] && cli flushall > /dev/null
        # New items each run.
        round=$((round + 1))
        seq "$items_n" | sed "s/^/p$round:/" > "$items"
        load=$("$bin" "${flags[@]}" load --batch "$b" "$items" | seconds)
        check=$("$bin" "${flags[@]}" check --batch "$b" "$items" | seconds)
        echo "batch $b $which: load $load s, check $check s (generation $(epoch))"
    done
done
