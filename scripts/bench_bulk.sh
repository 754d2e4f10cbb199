#!/usr/bin/env bash
# Bulk loads and checks at any size (issue 14), in one run on one machine (results in
# BENCHMARKS.md, "Bulk loads at any size (issue 14)"):
#  1. ROUNDS paired rounds on one private redis-server: the per-item go-zero pattern
#     (benches/peers.rs gozero: 50 clients, one EVALSHA of go-zero's set script per item,
#     200,000 items) on a go-zero filter sized for ITEMS at 1e-4 (23 MiB for 10,000,000); then
#     `redbloom load` of ITEMS lines into an empty filter of that size (a merge by ranges), the
#     same load into that filter once it holds ITEMS other items, and the BITFIELD path on
#     1,000,000 lines (`--batch 1000`: what the previous build did for every filter over 4 MiB);
#  2. in each round, the native layout at 1% next to RedisBloom (a second private server with
#     the module, ../shared/tools/redisbloom-server.sh; BF.MADD / BF.MEXISTS of 1,000 items per
#     command from 8 tasks, benches/peers.rs): load and check of 1,000,000 items into filters
#     sized for CAPACITY = 1M, 10M and 100M items, and the load of ITEMS items into the one
#     sized for 100M;
#  3. the knob: the load of part 1 with --merge-chunk 64K, 128K, 256K, 1M and 4M, every command's
#     server time logged (SLOWLOG, slowlog-log-slower-than 0, at most 1,000,000 entries);
#  4. a 512 MiB filter (--bits 4294967296): the load of ITEMS lines with every command logged
#     (the longest one), then checks of 1,000,000 lines by ranges and by BITFIELD_RO.
# Usage: scripts/bench_bulk.sh [ITEMS] [ROUNDS]  (defaults 10000000 2)
# Needs redis-server, redis-cli, python3; part 2's RedisBloom rows are skipped, and said so,
# when the module does not start.
set -euo pipefail
cd "$(dirname "$0")/.."
items_n=${1:-10000000}
rounds=${2:-2}
for n in "$items_n" "$rounds"; do
    case $n in ''|*[!0-9]*|0*) echo "usage: $0 [ITEMS] [ROUNDS] (positive whole numbers)" >&2; exit 2;; esac
done
out=target/bench
mkdir -p "$out"
results="$out/bulk.jsonl"
: > "$results"
helper=scripts/bench_bulk.py
cargo build --release --quiet -p redbloom-cli --bin redbloom
redbloom=target/release/redbloom
cargo bench --no-run --quiet -p redbloom --bench peers 2> "$out/build.log" || { cat "$out/build.log"; exit 1; }
peers=$(ls -t target/release/deps/peers-* | grep -v '\.d$' | head -1)

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
port=$(free_port)
bloom_port=""
cleanup() {
    redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
    if [ -n "$bloom_port" ]; then redis-cli -p "$bloom_port" shutdown nosave >/dev/null 2>&1 || true; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
    --logfile "$PWD/$out/redis-$port.log" --dir "$PWD/$out"
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
redis-cli -p "$port" ping >/dev/null
url="redis://127.0.0.1:$port"
if [ -f ../shared/tools/redisbloom-server.sh ]; then
    bloom_port=$(free_port)
    bash ../shared/tools/redisbloom-server.sh "$bloom_port" > "$out/redisbloom.log" 2>&1 || true
    redis-cli -p "$bloom_port" ping >/dev/null 2>&1 || { echo "RedisBloom did not start (see $out/redisbloom.log): no RedisBloom rows"; bloom_port=""; }
fi
flush() { redis-cli -p "$port" flushall >/dev/null; }

items="$out/bulk-items.txt"
others="$out/bulk-others.txt"
million="$out/bulk-million.txt"
[ "$(wc -l < "$items" 2>/dev/null || echo 0)" -eq "$items_n" ] || seq 0 $((items_n - 1)) | sed 's/^/item:/' > "$items"
[ "$(wc -l < "$others" 2>/dev/null || echo 0)" -eq "$items_n" ] || seq 0 $((items_n - 1)) | sed 's/^/other:/' > "$others"
head -n 1000000 "$items" > "$million"

run() {
    local label=$1; shift
    local line
    line=$("$@")
    echo "{\"label\":\"$label\",\"result\":$line}" >> "$results"
    echo "$label: $line"
}
# The server's work during one command (SLOWLOG and commandstats since `watch`), and the
# command's peak RSS.
watched() {
    local label=$1; shift
    local before
    before=$(python3 "$helper" watch "$port" | python3 -c 'import json,sys; print(json.load(sys.stdin)["cpu"])')
    run "$label" /usr/bin/time -f '%M' -o "$out/rss.txt" "$@"
    run "${label}_server" python3 "$helper" server "$port" "$before"
    run "${label}_rss" echo "{\"kib\":$(tail -1 "$out/rss.txt")}"
}

gz=(--url "$url" --key gz --capacity "$items_n" --fpr 0.0001 --json)
echo "--- Redis $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/'), $(nproc) cores, loopback;" \
    "$items_n items, $rounds round(s); $(uptime)"

for round in $(seq "$rounds"); do
    # 1. go-zero layout, 1e-4: the per-item pattern, then loads.
    flush
    run gozero_add "$peers" gozero "$url" gzp 191859095 add 200000 50
    flush
    watched load_empty "$redbloom" "${gz[@]}" load "$items"
    run info_empty "$redbloom" "${gz[@]}" info
    flush
    "$redbloom" "${gz[@]}" load "$others" > /dev/null
    watched load_full "$redbloom" "${gz[@]}" load "$items"
    flush
    watched load_bitfield "$redbloom" "${gz[@]}" load "$million" --batch 1000

    # 2. Native layout at 1% next to RedisBloom, 1,000,000 items.
    for cap in 1000000 10000000 100000000; do
        flush
        native=(--url "$url" --key native --layout native --capacity "$cap" --fpr 0.01 --json)
        run "native_load_$cap" "$redbloom" "${native[@]}" load "$million"
        run "native_check_$cap" "$redbloom" "${native[@]}" check "$million"
        run "native_info_$cap" "$redbloom" "${native[@]}" info
        if [ -n "$bloom_port" ]; then
            redis-cli -p "$bloom_port" flushall >/dev/null
            rb="redis://127.0.0.1:$bloom_port"
            run "rb_load_$cap" "$peers" redisbloom "$rb" rb add item: 1000000 1000 8 "$cap" 0.01
            run "rb_check_$cap" "$peers" redisbloom "$rb" rb exists item: 1000000 1000 8
        fi
    done
    flush
    run native_many_100000000 "$redbloom" "${native[@]}" load "$items"
    if [ -n "$bloom_port" ]; then
        redis-cli -p "$bloom_port" flushall >/dev/null
        run rb_many_100000000 "$peers" redisbloom "$rb" rb add item: "$items_n" 1000 8 100000000 0.01
    fi
done

# 3. The knob.
for chunk in 65536 131072 262144 1048576 4194304; do
    flush
    watched "knob_load_$chunk" "$redbloom" "${gz[@]}" --merge-chunk "$chunk" load "$items"
done

# 4. 512 MiB.
flush
big=(--url "$url" --key big --bits 4294967296 --json)
watched big_load "$redbloom" "${big[@]}" load "$items"
watched big_check "$redbloom" "${big[@]}" check "$million"
watched big_check_bitfield "$redbloom" "${big[@]}" check "$million" --batch 1000
flush

python3 "$helper" summary "$results"
