#!/usr/bin/env bash
# A lone caller's latency (issue 24's target "concurrency 1: p50 latency of a window add ≤ 1.2x
# cca968f's": group commit must not make a lone call wait for company): `bench --concurrency 1
# --batch 1` of ITEMS single adds into a window filter (1 h, 1M at 0.01), BASE and NEW
# alternating, ROUNDS times, one private redis-server (FLUSHALL before each run). Prints each
# run's p50 and p99 (µs) and the medians.
# Usage: scripts/lone_latency.sh BASE_BIN NEW_BIN [ROUNDS] [ITEMS] [FLAGS...]
set -euo pipefail
base=$1 new=$2 rounds=${3:-5} items=${4:-20000}
shift $(( $# < 4 ? $# : 4 ))
flags=("$@")
[ ${#flags[@]} -gt 0 ] || flags=(--window 1h --capacity 1000000 --fpr 0.01)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes --logfile /dev/null
trap 'redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true' EXIT
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
results=$(mktemp)
for round in $(seq "$rounds"); do
    for which in base new; do
        bin=$base
        [ "$which" = new ] && bin=$new
        redis-cli -p "$port" flushall > /dev/null
        out=$("$bin" --url "redis://127.0.0.1:$port" --key w --json "${flags[@]}" bench --op add \
            --items "$items" --concurrency 1 --batch 1)
        python3 -c 'import json,sys; d=json.loads(sys.argv[2]); print(sys.argv[1], d["p50_us"], d["p99_us"])' \
            "$which" "$out" | tee -a "$results"
    done
done
python3 - "$results" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    which, p50, p99 = line.split()
    rows.setdefault(which, []).append((float(p50), float(p99)))
b = [statistics.median(x) for x in zip(*rows["base"])]
n = [statistics.median(x) for x in zip(*rows["new"])]
print(f"median p50: base {b[0]:.0f} µs, new {n[0]:.0f} µs ({n[0]/b[0]:.2f}x); p99: base {b[1]:.0f}, new {n[1]:.0f} ({n[1]/b[1]:.2f}x)")
PY
rm -f "$results"
