#!/usr/bin/env bash
# What exact answers across retries cost (BENCHMARKS.md "What exact answers cost"): server CPU
# per item (INFO cpu around the run) and wall-clock items/s of single-item adds (`bench --op add`,
# 64 tasks, batch 1) and of bulk loads (native dense load, native and go-zero loads by ranges
# past 4 MiB, counting load, window load, growing load, 1,000,000 items), for BASE (a build
# before exact answers), NEW (exact answers, the default) and NEW --inexact-retries, alternately, ROUNDS times, against one private
# redis-server, FLUSHALL before each run; the median of the rounds. Then the memory the records
# hold: 600,000 single-item adds at full speed with --retry-for 5 (a ring of 1-s slots: at most
# 8 s of records), MEMORY USAGE of the ring keys at the end, and the rate they were written at.
# Usage: scripts/exact_cost.sh BASE_BIN NEW_BIN [ROUNDS]
# ONLY=REGEX runs only the workloads whose names match it (and skips the records' memory).
set -euo pipefail
base=$1 new=$2 rounds=${3:-3}
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes --logfile /dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"; redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true' EXIT
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
cli() { redis-cli -p "$port" "$@"; }
cpu() { cli info cpu | grep -E "used_cpu_(user|sys):" | cut -d: -f2 | tr -d '\r' | paste -sd+ | bc; }
seq 0 999999 | sed 's/^/item:/' > "$tmp/items"

# run LABEL BIN ITEMS ARGS...: one run; prints "LABEL items/s us-of-server-CPU-per-item"
run() {
    local label=$1 bin=$2 items=$3
    shift 3
    cli flushall > /dev/null
    local before after out
    before=$(cpu)
    out=$("$bin" --url "redis://127.0.0.1:$port" --json "$@")
    after=$(cpu)
    python3 - "$label" "$items" "$before" "$after" "$out" <<'EOF'
import json, sys
label, items, before, after, out = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), json.loads(sys.argv[5])
rate = out.get("items_per_sec") or items / out["seconds"]
print(f"{label}\t{rate:.0f}\t{(after - before) * 1e6 / items:.2f}")
EOF
}

workload() { # NAME ITEMS ARGS...
    local name=$1 items=$2
    shift 2
    [[ -z ${ONLY:-} || $name =~ $ONLY ]] || return 0
    for _ in $(seq "$rounds"); do
        run "$name base" "$base" "$items" "$@"
        run "$name exact" "$new" "$items" "$@"
        run "$name inexact" "$new" "$items" --inexact-retries "$@"
    done
}

{
    workload "native single add" 100000 --key s --layout native --capacity 1000000 --fpr 0.01 \
        bench --op add --items 100000 --concurrency 64
    workload "counting single add" 100000 --key s --counting --capacity 1000000 --fpr 0.01 \
        bench --op add --items 100000 --concurrency 64
    workload "window single add" 100000 --key s --window 1h --capacity 1000000 --fpr 0.01 \
        bench --op add --items 100000 --concurrency 64
    workload "native load 1M" 1000000 --key l --layout native --capacity 1000000 --fpr 0.01 \
        load "$tmp/items"
    workload "native 4.8 MB load 1M" 1000000 --key l --layout native --capacity 4000000 \
        --fpr 0.01 load "$tmp/items"
    workload "go-zero 4.8 MB load 1M" 1000000 --key l --capacity 4000000 --fpr 0.01 \
        load "$tmp/items"
    workload "counting load 1M" 1000000 --key l --counting --capacity 1000000 --fpr 0.01 \
        load "$tmp/items"
    workload "window load 1M" 1000000 --key l --window 1h --capacity 1000000 --fpr 0.01 \
        load "$tmp/items"
    workload "growing load 1M" 1000000 --key l --growth 2 --capacity 15625 --fpr 0.01 \
        load "$tmp/items"
} > "$tmp/runs"
python3 - "$tmp/runs" <<'EOF'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    label, rate, cpu = line.rstrip("\n").split("\t")
    rows.setdefault(label, []).append((float(rate), float(cpu)))
print("| workload | build | items/s (median) | µs of server CPU per item (median) |")
print("|---|---|---|---|")
for label, runs in rows.items():
    name, build = label.rsplit(" ", 1)
    rate = statistics.median(r for r, _ in runs)
    cpu = statistics.median(c for _, c in runs)
    print(f"| {name} | {build} | {rate:,.0f} | {cpu:.2f} |")
EOF

# Record memory at a rate: single-item adds for longer than the ring holds (records kept 7-8 s
# with --retry-for 5).
[[ -z ${ONLY:-} ]] || exit 0
cli flushall > /dev/null
out=$("$new" --url "redis://127.0.0.1:$port" --json --key m --layout native --capacity 100000000 \
    --fpr 0.01 --retry-for 5 bench --op add --items 600000 --concurrency 64)
rings=$(cli --scan --pattern '{m}:redbloom:1:m:once:*')
bytes=0 records=0
for ring in $rings; do
    bytes=$((bytes + $(cli memory usage "$ring" samples 0)))
    records=$((records + $(cli hlen "$ring") - 1))
done
echo "records: $records in $(echo "$rings" | wc -w) ring keys, $bytes bytes ($((bytes / (records > 0 ? records : 1))) per record); bench: $out"
