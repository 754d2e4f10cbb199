#!/usr/bin/env bash
# A window filter's Redis memory per item (issue 54; BENCHMARKS.md "Window memory"): an 8 s
# window, G = 4, `--capacity 500000`, ITEMS items per window loaded evenly for two windows
# (32 slices of 0.5 s, each one `redbloom load` of ITEMS/16 distinct items), into a private
# redis-server; right after, the summed `MEMORY USAGE … SAMPLES 0` of every key the server
# holds (the filter's alone: the server is its own), and that in bits per item of the last
# window. For each rate given.
# Usage: scripts/window_memory.sh REDBLOOM_BIN [ITEMS] [FPR...]
set -euo pipefail
bin=$1 items=${2:-500000}
shift $(($# < 2 ? $# : 2))
rates=("$@")
[ ${#rates[@]} -gt 0 ] || rates=(0.01 0.001)
cd "$(dirname "$0")/.."
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
    --logfile /dev/null
trap 'redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true' EXIT
until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.05; done
slice=$((items / 16))
chunks=$(mktemp -d)
for s in $(seq 0 31); do
    seq -f "w$s-%.0f" 1 "$slice" > "$chunks/$s"
done
for fpr in "${rates[@]}"; do
    redis-cli -p "$port" flushall >/dev/null
    flags=(--url "redis://127.0.0.1:$port" --key win --window 8s --generations 4
        --capacity 500000 --fpr "$fpr")
    start=$(date +%s.%N)
    for s in $(seq 0 31); do
        "$bin" "${flags[@]}" load "$chunks/$s" >/dev/null 2>&1
        # the next slice starts 0.5 s after this one did
        python3 -c "import time; t=$start+0.5*($s+1)-time.time(); time.sleep(max(0,t))"
    done
    total=$(redis-cli -p "$port" --scan | while read -r key; do
        redis-cli -p "$port" memory usage "$key" samples 0
    done | awk '{s+=$1} END {print s+0}')
    keys=$(redis-cli -p "$port" dbsize)
    awk -v b="$total" -v n="$items" -v f="$fpr" -v k="$keys" 'BEGIN {
        printf "fpr %s, %d items per window: %d bytes in %d keys, %.1f bits per item\n",
            f, n, b, k, 8 * b / n }'
done
rm -rf "$chunks"
