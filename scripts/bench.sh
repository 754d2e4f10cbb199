#!/usr/bin/env bash
# Side-by-side throughput, in one run on one machine (issue 3; results in BENCHMARKS.md):
#   (a) the per-item go-zero pattern: one EVALSHA of go-zero's scripts per item, one round trip
#       each, CLIENTS concurrent clients with a connection each;
#   (b) redbloom single-item add/exists: 64 tasks sharing one client (`redbloom bench`);
#   (c) redbloom load/check of 1,000,000 items, go-zero layout, on a filter small enough for
#       the dense path (sized for those items at 1%: 1.4 MB) and on one that is not (sized for
#       ten times as many: 13.8 MB, over the dense path's 4 MiB, so every call is a BITFIELD);
#   (d) RedisBloom BF.MADD/BF.MEXISTS in batches of 100 next to the native layout at a 1%
#       target, with both false-positive rates measured on 1,000,000 absent items.
# Usage: scripts/bench.sh [ITEMS_SINGLE] [ITEMS_BULK]    (defaults 200000 1000000)
# Needs redis-server on PATH; RedisBloom via ../shared/tools/redisbloom-server.sh when present.
set -euo pipefail
cd "$(dirname "$0")/.."
single=${1:-200000}
bulk=${2:-1000000}
clients=50
tasks=64
out=target/bench
mkdir -p "$out"
results="$out/results.jsonl"
: > "$results"

cargo build --release --quiet -p redbloom-cli --bin redbloom
cargo bench --no-run --quiet -p redbloom --bench peers 2> "$out/build.log" || { cat "$out/build.log"; exit 1; }
peers=$(ls -t target/release/deps/peers-* | grep -v '\.d$' | head -1)
redbloom=target/release/redbloom

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
port=$(free_port)
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
    --logfile "$PWD/$out/redis-$port.log" --dir "$PWD/$out"
bloom_port=""
cleanup() {
    redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
    [ -n "$bloom_port" ] && redis-cli -p "$bloom_port" shutdown nosave >/dev/null 2>&1 || true
}
trap cleanup EXIT
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
url="redis://127.0.0.1:$port"
flush() { redis-cli -p "$port" flushall >/dev/null; }

# label, then the command; its one JSON line goes to the results with the label.
run() {
    local label=$1; shift
    local line
    line=$("$@")
    echo "{\"label\":\"$label\",\"result\":$line}" >> "$results"
    echo "$label: $line"
}

seq 0 $((bulk - 1)) | sed 's/^/item:/' > "$out/items.txt"
seq 0 $((bulk - 1)) | sed 's/^/absent:/' > "$out/absent.txt"
gz_bits=$((20 * single))

echo "--- Redis $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/'), $(nproc) cores, loopback"
# (a) go-zero's per-item pattern.
flush
run gozero_add "$peers" gozero "$url" gz "$gz_bits" add "$single" "$clients"
run gozero_exists "$peers" gozero "$url" gz "$gz_bits" exists "$single" "$clients"
# (b) redbloom single-item calls on one shared client.
flush
run single_add "$redbloom" --url "$url" --key rb --bits "$gz_bits" --json bench --op add --items "$single" --concurrency "$tasks"
run single_exists "$redbloom" --url "$url" --key rb --bits "$gz_bits" --json bench --op exists --items "$single" --concurrency "$tasks"
# (c) bulk, go-zero layout: dense (capacity = items) and BITFIELD (capacity = 10 x items).
for scale in 1 10; do
    flush
    size=(--url "$url" --key bulk --capacity $((scale * bulk)) --fpr 0.01 --json)
    run "load_gozero_x$scale" "$redbloom" "${size[@]}" load "$out/items.txt"
    run "check_gozero_x$scale" "$redbloom" "${size[@]}" check "$out/items.txt"
    run "absent_gozero_x$scale" "$redbloom" "${size[@]}" check "$out/absent.txt"
    run "info_gozero_x$scale" "$redbloom" "${size[@]}" info
done
# (d) the native layout next to RedisBloom.
flush
size=(--url "$url" --key native --layout native --capacity "$bulk" --fpr 0.01 --json)
run load_native "$redbloom" "${size[@]}" load "$out/items.txt"
run check_native "$redbloom" "${size[@]}" check "$out/items.txt"
run absent_native "$redbloom" "${size[@]}" check "$out/absent.txt"
run info_native "$redbloom" "${size[@]}" info
if [ -x ../shared/tools/redisbloom-server.sh ] || [ -f ../shared/tools/redisbloom-server.sh ]; then
    bloom_port=$(free_port)
    bash ../shared/tools/redisbloom-server.sh "$bloom_port" > "$out/redisbloom.log" 2>&1 || true
    if redis-cli -p "$bloom_port" ping >/dev/null 2>&1; then
        burl="redis://127.0.0.1:$bloom_port"
        run redisbloom_madd "$peers" redisbloom "$burl" rb add item: "$bulk" 100 8 "$bulk" 0.01
        run redisbloom_mexists "$peers" redisbloom "$burl" rb exists item: "$bulk" 100 8
        run redisbloom_absent "$peers" redisbloom "$burl" rb exists absent: "$bulk" 100 8
    else
        echo "RedisBloom did not start (see $out/redisbloom.log): (d) has no peer"
    fi
fi

python3 scripts/bench_table.py "$results"
