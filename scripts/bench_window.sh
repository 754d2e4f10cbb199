#!/usr/bin/env bash
# Window filters next to plain ones (issue 11; results in BENCHMARKS.md), in one run against
# one private redis-server: single-item add/exists (64 tasks, one client) and load/check of
# BULK items, a plain native filter and a window filter (W = 1 h, G = 4) both sized for BULK
# items at 1%; then the memory of each (MEMORY USAGE of every key) and both false-positive
# rates on BULK items never added.
# Usage: scripts/bench_window.sh [ITEMS_SINGLE] [ITEMS_BULK] [ROUNDS]  (defaults 200000 1000000 3)
set -euo pipefail
cd "$(dirname "$0")/.."
single=${1:-200000}
bulk=${2:-1000000}
rounds=${3:-3}
out=target/bench
mkdir -p "$out"
results="$out/window.jsonl"
: > "$results"
cargo build --release --quiet -p redbloom-cli --bin redbloom
redbloom=target/release/redbloom

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
port=$(free_port)
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
    --logfile "$PWD/$out/redis-$port.log" --dir "$PWD/$out"
trap 'redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true' EXIT
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
url="redis://127.0.0.1:$port"

seq 0 $((bulk - 1)) | sed 's/^/item:/' > "$out/items.txt"
seq 0 $((bulk - 1)) | sed 's/^/absent:/' > "$out/absent.txt"

run() {
    local label=$1; shift
    local line
    line=$("$@")
    echo "{\"label\":\"$label\",\"result\":$line}" >> "$results"
    echo "$label: $line"
}
memory() {
    local total=0 key bytes
    for key in $(redis-cli -p "$port" --scan --pattern "$1"); do
        bytes=$(redis-cli -p "$port" memory usage "$key" samples 0)
        total=$((total + bytes))
    done
    echo "$total"
}

plain=(--url "$url" --key plain --layout native --capacity "$bulk" --fpr 0.01 --json)
window=(--url "$url" --key win --window 1h --capacity "$bulk" --fpr 0.01 --json)
echo "--- Redis $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/'), $(nproc) cores, loopback"
for round in $(seq "$rounds"); do
    redis-cli -p "$port" flushall >/dev/null
    # Alternate which kind goes first, so that neither always runs on a warmer server.
    kinds="plain window"
    [ $((round % 2)) -eq 0 ] && kinds="window plain"
    for kind in $kinds; do
        if [ "$kind" = plain ]; then args=("${plain[@]}"); else args=("${window[@]}"); fi
        run "${kind}_add" "$redbloom" "${args[@]}" bench --op add --items "$single" --concurrency 64
        run "${kind}_exists" "$redbloom" "${args[@]}" bench --op exists --items "$single" --concurrency 64
        "$redbloom" "${args[@]}" clear >/dev/null
        run "${kind}_load" "$redbloom" "${args[@]}" load "$out/items.txt"
        run "${kind}_check" "$redbloom" "${args[@]}" check "$out/items.txt"
        run "${kind}_absent" "$redbloom" "${args[@]}" check "$out/absent.txt"
    done
    echo "{\"label\":\"plain_memory\",\"result\":{\"bytes\":$(memory plain)}}" >> "$results"
    echo "{\"label\":\"window_memory\",\"result\":{\"bytes\":$(memory '{win}:*')}}" >> "$results"
done
python3 - "$results" <<'PY'
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
by = {}
for row in rows:
    by.setdefault(row["label"], []).append(row["result"])
def med(label, field):
    return statistics.median(r[field] for r in by[label])
print("| workload | plain items/s | window items/s | ratio | target |")
print("|---|---|---|---|---|")
for op, field, target in [("add", "items_per_sec", "0.5x"), ("exists", "items_per_sec", "0.5x")]:
    p, w = med(f"plain_{op}", field), med(f"window_{op}", field)
    print(f"| {op}, 1 item per call, 64 tasks | {p:,.0f} | {w:,.0f} | {w/p:.2f}x | >= {target} |")
for op in ["load", "check"]:
    p = statistics.median(r["items"] / r["seconds"] for r in by[f"plain_{op}"])
    w = statistics.median(r["items"] / r["seconds"] for r in by[f"window_{op}"])
    print(f"| {op} 1M | {p:,.0f} | {w:,.0f} | {w/p:.2f}x | >= 0.5x |")
for kind in ["plain", "window"]:
    lat = by[f"{kind}_exists"]
    print(f"{kind} exists latency: p50 {statistics.median(r['p50_us'] for r in lat):.0f} us, p99 {statistics.median(r['p99_us'] for r in lat):.0f} us")
    fp = statistics.median(r["present"] / r["items"] for r in by[f"{kind}_absent"])
    mem = statistics.median(r["bytes"] for r in by[f"{kind}_memory"])
    print(f"{kind}: false-positive rate on absent items {fp:.4%}; MEMORY USAGE {mem:,} bytes")
PY
