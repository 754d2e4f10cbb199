#!/usr/bin/env bash
# Window generations past 4 MiB (issue 24, BENCHMARKS.md "Window generations past 4 MiB"): a
# `load` and a `check` of 1,000,000 items into a window filter (1 h, --fpr 0.001) of capacity
# 2,000,000 (generations of 3.7 MB: the whole-generation dense path) and 10,000,000 (18 MB:
# by ranges in NEW, per item in BASE), with BASE and NEW, alternating, ROUNDS times, against
# one private redis-server (FLUSHALL before each load). Prints each run's seconds.
# Usage: scripts/window_ranges.sh BASE_BIN NEW_BIN [ROUNDS] [CAPACITIES]
set -euo pipefail
base=$1 new=$2 rounds=${3:-3} capacities=${4:-"2000000 10000000"}
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes --logfile /dev/null
trap 'redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true; rm -f "$items"' EXIT
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
items=$(mktemp)
seq 1000000 | sed 's/^/p:/' > "$items"
seconds() { python3 -c 'import json,sys; print(json.load(sys.stdin)["seconds"])'; }
for round in $(seq "$rounds"); do
    for cap in $capacities; do
        for which in base new; do
            bin=$base
            [ "$which" = new ] && bin=$new
            redis-cli -p "$port" flushall > /dev/null
            flags=(--url "redis://127.0.0.1:$port" --key w --window 1h --capacity "$cap" --fpr 0.001 --json)
            load=$("$bin" "${flags[@]}" load "$items" | seconds)
            check=$("$bin" "${flags[@]}" check "$items" | seconds)
            echo "round $round capacity $cap $which: load ${load} s, check ${check} s"
        done
    done
done
