#!/usr/bin/env bash
# The records of exact answers under load (issue 51; BENCHMARKS.md "Records"): 64 tasks of
# single-item adds (`redbloom bench --op add --concurrency 64 --batch 1`, go-zero layout,
# default flags: exact answers on, the 30 s retry budget) for about SECONDS seconds against one
# private redis-server, the summed MEMORY USAGE of every record key (`*:once:*`) sampled every
# second; then how long until no record key is left. Second, the same bench against a server
# at `maxmemory 50mb` and `noeviction` whose filter takes 38 MB: the records' peak, and how long
# after the bench another application's 1 MB SET goes through.
# Usage: scripts/records_memory.sh REDBLOOM_BIN [SECONDS]
set -euo pipefail
bin=$1 seconds=${2:-120}
cd "$(dirname "$0")/.."
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
start_server() {
    redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
        --logfile /dev/null "$@"
    until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.05; done
}
trap 'redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true' EXIT
# record_bytes: the summed MEMORY USAGE of the record keys, and how many records they hold.
record_bytes() {
    redis-cli -p "$port" --scan --pattern '*:once:*' | python3 -c '
import subprocess, sys
keys = [k.strip() for k in sys.stdin if k.strip()]
total = held = 0
for k in keys:
    out = subprocess.run(["redis-cli", "-p", sys.argv[1], "memory", "usage", k], capture_output=True, text=True).stdout.strip()
    total += int(out) if out.isdigit() else 0
    fields = subprocess.run(["redis-cli", "-p", sys.argv[1], "hkeys", k], capture_output=True, text=True).stdout.split()
    held += sum(1 for f in fields if f not in ("e", "t", "n", "q"))
print(total, held, len(keys))' "$port"
}
# bench ITEMS FLAGS...: the bench in the background; samples until it exits; prints the peak.
bench() {
    local items=$1
    shift
    "$bin" --url "redis://127.0.0.1:$port" --key b "$@" --json bench --op add --items "$items" \
        --concurrency 64 --batch 1 > /tmp/records_bench.json 2>&1 &
    local pid=$! peak=0 peak_held=0 samples=0
    while kill -0 "$pid" 2>/dev/null; do
        read -r bytes held keys < <(record_bytes)
        (( bytes > peak )) && peak=$bytes
        (( held > peak_held )) && peak_held=$held
        samples=$((samples + 1))
        sleep 1
    done
    wait "$pid" || true
    echo "bench: $(cat /tmp/records_bench.json)"
    echo "records: peak $peak bytes, peak $peak_held records, $samples samples"
}
rate=130000
# Part 1 (SKIP_FIRST=1 leaves it out).
if [ -z "${SKIP_FIRST:-}" ]; then
start_server

bench $((rate * seconds)) --capacity 20000000 --fpr 0.01
start=$(date +%s.%N)
while [ -n "$(redis-cli -p "$port" --scan --pattern '*:once:*')" ]; do sleep 0.2; done
echo "record keys gone $(python3 -c "print(round($(date +%s.%N) - $start, 1))") s after the last write"
redis-cli -p "$port" shutdown nosave > /dev/null
fi
# Part 2.
start_server --maxmemory 50mb --maxmemory-policy noeviction
"$bin" --url "redis://127.0.0.1:$port" --key b --capacity 33000000 --fpr 0.01 --layout native add first > /dev/null
# The key grown to its whole size (a string grows only to its highest bit written).
redis-cli -p "$port" setbit b $(( $("$bin" --url "redis://127.0.0.1:$port" --key b --capacity 33000000 --fpr 0.01 --layout native --json info | python3 -c 'import json,sys; print(json.load(sys.stdin)["bits"])') - 1 )) 0 > /dev/null
echo "used_memory with the filter: $(redis-cli -p "$port" info memory | awk -F: '/^used_memory:/ {print $2}' | tr -d '\r')"
bench $((rate * 20)) --capacity 33000000 --fpr 0.01 --layout native
start=$(date +%s.%N)
echo "used_memory after the bench: $(redis-cli -p "$port" info memory | awk -F: '/^used_memory:/ {print $2}' | tr -d '\r')"
value=$(mktemp)
head -c 1000000 /dev/zero | tr '\0' x > "$value"
until redis-cli -p "$port" -x set another-application < "$value" 2>/dev/null | grep -q OK; do sleep 0.2; done
rm -f "$value"
echo "another application's 1 MB SET went through $(python3 -c "print(round($(date +%s.%N) - $start, 1))") s after the bench"
