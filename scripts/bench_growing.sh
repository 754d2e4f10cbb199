#!/usr/bin/env bash
# Growing filters, in one run on one machine (results in BENCHMARKS.md):
#  1. at 64x the first level's capacity, ROUNDS paired rounds on one private redis-server,
#     the order alternating: a plain filter (native layout) sized for all BULK items at 1%,
#     and a growing filter whose first level takes BULK/64 (growth 2, 1%): load of BULK items,
#     bulk check of them, check of BULK absent items (the false-positive rate), single-item
#     exists (64 tasks) of 200,000 of them; the growing filter's info;
#  2. against RedisBloom's scaling filter (BF.RESERVE k 0.01 1000, EXPANSION 2 by default;
#     BF.MADD and BF.MEXISTS of 1,000 items per command from 8 tasks, benches/peers.rs, on a
#     second private server with the module) and a growing filter of first level 1,000, growth 2, on the same BULK items: load
#     and check rates, the false-positive rate on BULK absent items, MEMORY USAGE of every key,
#     levels.
# Usage: scripts/bench_growing.sh [BULK] [ROUNDS]  (defaults 1000000 3)
# Needs redis-server, redis-cli, python3; RedisBloom via ../shared/tools/redisbloom-server.sh
# (part 2's RedisBloom row is skipped, and said so, when it does not start).
set -euo pipefail
cd "$(dirname "$0")/.."
bulk=${1:-1000000}
rounds=${2:-3}
for n in "$bulk" "$rounds"; do
    case $n in ''|*[!0-9]*|0*) echo "usage: $0 [BULK] [ROUNDS] (positive whole numbers)" >&2; exit 2;; esac
done
out=target/bench
mkdir -p "$out"
results="$out/growing.jsonl"
: > "$results"
helper=scripts/bench_growing.py
cargo build --release --quiet -p redbloom-cli --bin redbloom
redbloom=target/release/redbloom
cargo bench --quiet --bench peers --no-run 2>/dev/null
peers=(cargo bench --quiet --bench peers --)

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

items="$out/growing-items.txt"
absent="$out/growing-absent.txt"
seq 0 $((bulk - 1)) | sed 's/^/bench:/' > "$items"
seq 0 $((bulk - 1)) | sed 's/^/absent:/' > "$absent"

run() {
    local label=$1; shift
    local line
    line=$("$@")
    echo "{\"label\":\"$label\",\"result\":$line}" >> "$results"
    echo "$label: $line"
}

first=$((bulk / 64))
plain=(--url "$url" --key plain --layout native --capacity "$bulk" --fpr 0.01 --json)
growing=(--url "$url" --key grow --growth 2 --capacity "$first" --fpr 0.01 --json)
echo "--- Redis $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/'), $(nproc) cores, loopback;" \
    "bulk $bulk, first level $first, $rounds round(s)"

# 1. At 64x.
for round in $(seq "$rounds"); do
    redis-cli -p "$port" flushall >/dev/null
    kinds="plain growing"
    [ $((round % 2)) -eq 0 ] && kinds="growing plain"
    for kind in $kinds; do
        if [ "$kind" = plain ]; then args=("${plain[@]}"); else args=("${growing[@]}"); fi
        run "${kind}_load" "$redbloom" "${args[@]}" load "$items"
        run "${kind}_check" "$redbloom" "${args[@]}" check "$items"
        run "${kind}_absent" "$redbloom" "${args[@]}" check "$absent"
        run "${kind}_exists" "$redbloom" "${args[@]}" bench --op exists --items 200000 --concurrency 64
        if [ "$kind" = growing ]; then run growing_info "$redbloom" "${args[@]}" info; fi
    done
done

# 2. Against RedisBloom, first level 1,000.
redis-cli -p "$port" flushall >/dev/null
ours=(--url "$url" --key ours --growth 2 --capacity 1000 --fpr 0.01 --json)
run ours_load "$redbloom" "${ours[@]}" load "$items"
run ours_check "$redbloom" "${ours[@]}" check "$items"
run ours_absent "$redbloom" "${ours[@]}" check "$absent"
run ours_memory python3 "$helper" memory "$port" '*ours*'
run ours_levels "$redbloom" "${ours[@]}" info

if [ -f ../shared/tools/redisbloom-server.sh ]; then
    bloom_port=$(free_port)
    bash ../shared/tools/redisbloom-server.sh "$bloom_port" > "$out/redisbloom.log" 2>&1 || true
fi
if [ -n "$bloom_port" ] && redis-cli -p "$bloom_port" ping >/dev/null 2>&1; then
    # benches/peers.rs: BF.MADD / BF.MEXISTS of 1,000 items per command from 8 tasks on one
    # connection (RedisBloom's best batch size), after BF.RESERVE rb 0.01 1000 (EXPANSION 2 is
    # RedisBloom's default, and checked below); the same items as the files.
    rb="redis://127.0.0.1:$bloom_port"
    run rb_load "${peers[@]}" redisbloom "$rb" rb add bench: "$bulk" 1000 8 1000 0.01
    run rb_check "${peers[@]}" redisbloom "$rb" rb exists bench: "$bulk" 1000 8
    run rb_absent "${peers[@]}" redisbloom "$rb" rb exists absent: "$bulk" 1000 8
    run rb_memory python3 "$helper" memory "$bloom_port" 'rb'
    levels=$(python3 "$helper" cmd "$bloom_port" BF.INFO rb | python3 -c '
import json, sys
r = json.load(sys.stdin)
d = dict(zip(r[::2], r[1::2]))
print(json.dumps({"levels": d["Number of filters"], "capacity": d["Capacity"], "size": d["Size"], "items": d["Number of items inserted"], "expansion": d["Expansion rate"]}))')
    run rb_levels echo "$levels"
else
    echo "RedisBloom did not start (see $out/redisbloom.log): no RedisBloom row"
fi

python3 "$helper" summary "$results"
