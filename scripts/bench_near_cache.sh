#!/usr/bin/env bash
# The near cache (issue 13; results in BENCHMARKS.md), in one run against one private
# redis-server:
# 1. `redbloom bench --op exists --concurrency 64` with and without `--near-cache 1s`, rounds
#    interleaved (which goes first alternates), on a plain filter of each layout (go-zero's, the
#    default, and native) filled with every item the benches look up;
# 2. the blacklist example (`--serve`, release build) under wrk: one instance without a near
#    cache and one with `--near-cache 1s`, sharing one blacklist, `GET /check/userN` over
#    100,000 names of which 1,000 are blocked, rounds interleaved. Skipped, saying so, when wrk
#    is not installed (`apt-get install -y wrk`).
# Prints a table of min / median per workload.
# Usage: scripts/bench_near_cache.sh [ITEMS_REDIS] [ITEMS_CACHED] [ROUNDS] [HTTP_SECONDS]
#        (defaults 300000 3000000 5 5)
set -euo pipefail
cd "$(dirname "$0")/.."
uncached=${1:-300000}
cached=${2:-3000000}
rounds=${3:-5}
http_seconds=${4:-5}
out=target/bench
mkdir -p "$out"
results="$out/near_cache.jsonl"
: > "$results"
cargo build --release --quiet -p redbloom-cli --bin redbloom
cargo build --release --quiet --features http --example blacklist
redbloom=target/release/redbloom
blacklist=target/release/examples/blacklist

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
port=$(free_port)
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
    --logfile "$PWD/$out/redis-$port.log" --dir "$PWD/$out"
services=()
cleanup() {
    for pid in "${services[@]}"; do kill "$pid" 2>/dev/null || true; done
    redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
}
trap cleanup EXIT
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
url="redis://127.0.0.1:$port"

run() {
    local label=$1; shift
    local line
    line=$("$@")
    echo "{\"label\":\"$label\",\"result\":$line}" >> "$results"
    echo "$label: $line"
}

echo "--- Redis $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/'), $(nproc) cores, loopback"
# Every item either bench looks up is in the filter: both answer "present" for all of them.
seq 0 $((cached - 1)) | sed 's/^/bench:/' > "$out/near_items.txt"
for layout in gozero native; do
    args=(--url "$url" --key "nc-$layout" --layout "$layout" --capacity "$cached" --fpr 0.01 --json)
    "$redbloom" "${args[@]}" load "$out/near_items.txt" >/dev/null
done
for round in $(seq "$rounds"); do
    order="redis cached"
    [ $((round % 2)) -eq 0 ] && order="cached redis"
    for layout in gozero native; do
        args=(--url "$url" --key "nc-$layout" --layout "$layout" --capacity "$cached" --fpr 0.01 --json)
        for how in $order; do
            if [ "$how" = redis ]; then
                run "${layout}_redis" "$redbloom" "${args[@]}" bench --op exists \
                    --items "$uncached" --concurrency 64
            else
                run "${layout}_cached" "$redbloom" "${args[@]}" bench --op exists \
                    --items "$cached" --concurrency 64 --near-cache 1s
            fi
        done
    done
done

if command -v wrk >/dev/null 2>&1; then
    # 1,000 of 100,000 names blocked, through the CLI (the example's filter: counting, 100,000
    # entries at 1e-6).
    seq 1 1000 | sed 's/^/user/' > "$out/blocked.txt"
    "$redbloom" --url "$url" --key bl --counting --capacity 100000 --fpr 0.000001 \
        load "$out/blocked.txt" >/dev/null
    start_service() { # LABEL ARGS...: starts an instance on port $service_port
        local label=$1; shift
        service_port=$(free_port)
        REDIS_URL="$url" "$blacklist" --serve "127.0.0.1:$service_port" --key bl "$@" \
            > "$out/blacklist-$label.log" 2>&1 &
        services+=($!)
        for _ in $(seq 100); do
            curl -s -o /dev/null "http://127.0.0.1:$service_port/stats" && break
            sleep 0.1
        done
    }
    start_service redis
    plain_port=$service_port
    start_service cached --near-cache 1s
    cached_port=$service_port
    cat > "$out/check.lua" <<'LUA'
-- GET /check/userN, N cycling over 1..100000 (1,000 of them blocked); one JSON line at the end.
counter = 0
request = function()
    counter = counter + 1
    return wrk.format("GET", "/check/user" .. (counter % 100000 + 1))
end
done = function(summary, latency, requests)
    local e = summary.errors
    io.write(string.format(
        '{"requests":%d,"seconds":%.3f,"errors":%d,"requests_per_sec":%.1f,"p50_us":%d,"p99_us":%d}\n',
        summary.requests, summary.duration / 1e6,
        e.connect + e.read + e.write + e.status + e.timeout,
        summary.requests / (summary.duration / 1e6),
        latency:percentile(50), latency:percentile(99)))
end
LUA
    for round in $(seq "$rounds"); do
        order="redis cached"
        [ $((round % 2)) -eq 0 ] && order="cached redis"
        for how in $order; do
            if [ "$how" = redis ]; then p=$plain_port; else p=$cached_port; fi
            run "http_$how" bash -c "wrk -t2 -c64 -d${http_seconds}s -s '$out/check.lua' \
                'http://127.0.0.1:$p' | tail -n 1"
        done
    done
    echo "cached instance: $(curl -s "http://127.0.0.1:$cached_port/stats")"
else
    echo "--- wrk is not installed (apt-get install -y wrk): the HTTP part is skipped"
fi

python3 - "$results" "$uncached" "$cached" <<'PY'
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
uncached, cached = int(sys.argv[2]), int(sys.argv[3])
by = {}
for row in rows:
    by.setdefault(row["label"], []).append(row["result"])
def stats(label, field):
    values = [r[field] for r in by[label]]
    return min(values), statistics.median(values), max(values)
print()
print("| workload | items/s min | items/s median | p50 us (median) | p99 us min / median / max | p99.9 us (median) | present |")
print("|---|---|---|---|---|---|---|")
for layout in ["gozero", "native"]:
    for how, n in [("redis", uncached), ("cached", cached)]:
        label = f"{layout}_{how}"
        rs = by[label]
        ok = all(r["present"] == r["items"] for r in rs)
        lo, med, _ = stats(label, "items_per_sec")
        p99 = stats(label, "p99_us")
        name = {"redis": "from Redis", "cached": "--near-cache 1s"}[how]
        print(f"| {layout}, exists, 64 tasks, {n:,} items, {name} | {lo:,.0f} | {med:,.0f} | "
              f"{statistics.median(r['p50_us'] for r in rs):.0f} | {p99[0]} / {p99[1]:.0f} / {p99[2]} | "
              f"{statistics.median(r['p999_us'] for r in rs):.0f} | {'all' if ok else 'NOT ALL'} |")
    ratio = stats(f"{layout}_cached", "items_per_sec")[1] / stats(f"{layout}_redis", "items_per_sec")[1]
    paired = [c["items_per_sec"] / r["items_per_sec"] for c, r in zip(by[f"{layout}_cached"], by[f"{layout}_redis"])]
    print(f"| {layout}: near cache / Redis | | {ratio:.1f}x (rounds: min {min(paired):.1f}x, median {statistics.median(paired):.1f}x) | | target p99 < 20 us | | |")
for label in ["gozero_cached", "native_cached"]:
    near = [r["near_cache"] for r in by[label]]
    print(f"{label}: hits {statistics.median(n['hits'] for n in near):,.0f}, misses "
          f"{statistics.median(n['misses'] for n in near):,.0f}, refreshes "
          f"{max(n['refreshes'] for n in near)} at most, tracking {all(n['tracking'] for n in near)}, "
          f"copy {near[0]['bytes']:,} bytes")
if "http_redis" in by:
    print()
    print("| blacklist example, wrk -t2 -c64 | requests/s min | requests/s median | p50 us (median) | p99 us min / median / max | errors |")
    print("|---|---|---|---|---|---|")
    for how, name in [("redis", "checks from Redis"), ("cached", "--near-cache 1s")]:
        rs = by[f"http_{how}"]
        lo, med, _ = stats(f"http_{how}", "requests_per_sec")
        p99 = stats(f"http_{how}", "p99_us")
        print(f"| {name} | {lo:,.0f} | {med:,.0f} | {statistics.median(r['p50_us'] for r in rs):.0f} | "
              f"{p99[0]} / {p99[1]:.0f} / {p99[2]} | {sum(r['errors'] for r in rs)} |")
    ratio = stats("http_cached", "requests_per_sec")[1] / stats("http_redis", "requests_per_sec")[1]
    print(f"| near cache / Redis | | {ratio:.2f}x | | | |")
PY
