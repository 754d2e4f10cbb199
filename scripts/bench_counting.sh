#!/usr/bin/env bash
# Counting filters next to plain ones, in one run on one machine (results in BENCHMARKS.md):
#  1. throughput, ROUNDS paired rounds on one private redis-server, the order alternating: a
#     plain filter (native layout) and a counting filter, both sized for BULK items at 1%:
#     single-item add/exists (64 tasks, one client) of ITEMS_SINGLE items and, counting only,
#     remove; then load/check of BULK items and, counting only, unload of them all;
#  2. memory of BULK items at a 1% target: MEMORY USAGE of the counting filter's key; of
#     rueidisprob's layout (a hash, field = counter index, value = count, one field per counter
#     in use: built from the counting filter's own counters); of RedisBloom's cuckoo filter
#     (CF.RESERVE + CF.ADD, on a second private server with the module); each one's
#     false-positive rate on BULK items never added.
# Cuckoo sizing: RedisBloom keeps 8-bit fingerprints (1..255) in nextpow2(capacity/bucketsize)
# buckets; a lookup compares 2 buckets x b slots, so with n items in B buckets the
# false-positive rate is about 2n/(255 B), whatever b is. "cf_sized" takes the smallest power
# of two B with 2n/(255 B) <= 1% and the default bucket size 2 (CF.RESERVE key 2B BUCKETSIZE 2:
# B buckets, 2B bytes; load n/2B <= 64%, well inside what b = 2 reaches, so no sub-filter is
# ever added; b = 1 would halve the bytes but tops out near 50% load). For 1M items: 2^20
# buckets, 2 MiB, about 0.75%. "cf_default" is what a user would type, CF.RESERVE key BULK
# (bucket size 2: 2^19 buckets for 1M, 95% load, so RedisBloom adds a second sub-filter and
# each lookup checks both: about 1.5%).
# Usage: scripts/bench_counting.sh [ITEMS_SINGLE] [ITEMS_BULK] [ROUNDS]  (defaults 200000 1000000 3)
# Needs redis-server, redis-cli, python3; RedisBloom via ../shared/tools/redisbloom-server.sh
# (skipped, and said so, when it does not start). Results: target/bench/counting.jsonl.
set -euo pipefail
cd "$(dirname "$0")/.."
single=${1:-200000}
bulk=${2:-1000000}
rounds=${3:-3}
for n in "$single" "$bulk" "$rounds"; do
    case $n in ''|*[!0-9]*|0*) echo "usage: $0 [ITEMS_SINGLE] [ITEMS_BULK] [ROUNDS] (positive whole numbers)" >&2; exit 2;; esac
done
out=target/bench
mkdir -p "$out"
results="$out/counting.jsonl"
: > "$results"
helper=scripts/bench_counting.py
cargo build --release --quiet -p redbloom-cli --bin redbloom
redbloom=target/release/redbloom

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

items="$out/counting-items.txt"
absent="$out/counting-absent.txt"
seq 0 $((bulk - 1)) | sed 's/^/item:/' > "$items"
seq 0 $((bulk - 1)) | sed 's/^/absent:/' > "$absent"

# label, then the command; its one JSON line goes to the results with the label.
run() {
    local label=$1; shift
    local line
    line=$("$@")
    echo "{\"label\":\"$label\",\"result\":$line}" >> "$results"
    echo "$label: $line"
}
# label, a JSON object, then NAME=VALUE pairs added to it (VALUE as JSON when it parses).
record() {
    local label=$1 json=$2; shift 2
    local line
    line=$(python3 - "$json" "$@" <<'PY'
import json, sys
obj = json.loads(sys.argv[1])
for pair in sys.argv[2:]:
    name, value = pair.split("=", 1)
    try:
        obj[name] = json.loads(value)
    except ValueError:
        obj[name] = value
print(json.dumps(obj))
PY
)
    echo "{\"label\":\"$label\",\"result\":$line}" >> "$results"
    echo "$label: $line"
}
field() { python3 -c 'import json, sys; print(json.dumps(json.loads(sys.argv[1])[sys.argv[2]]))' "$1" "$2"; }
used_memory() { redis-cli -p "$1" info memory | sed -n 's/^used_memory:\([0-9]*\).*/\1/p'; }
memory_usage() { redis-cli -p "$1" memory usage "$2" samples 0; }

plain=(--url "$url" --key plain --layout native --capacity "$bulk" --fpr 0.01 --json)
counting=(--url "$url" --key cnt --counting --capacity "$bulk" --fpr 0.01 --json)
echo "--- Redis $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/'), $(nproc) cores, loopback;" \
    "single $single, bulk $bulk, $rounds round(s)"

# 1. Throughput.
for round in $(seq "$rounds"); do
    redis-cli -p "$port" flushall >/dev/null
    # Alternate which kind goes first, so that neither always runs on a warmer server.
    kinds="plain counting"
    [ $((round % 2)) -eq 0 ] && kinds="counting plain"
    for kind in $kinds; do
        if [ "$kind" = plain ]; then args=("${plain[@]}"); else args=("${counting[@]}"); fi
        run "${kind}_add" "$redbloom" "${args[@]}" bench --op add --items "$single" --concurrency 64
        run "${kind}_exists" "$redbloom" "${args[@]}" bench --op exists --items "$single" --concurrency 64
        if [ "$kind" = counting ]; then
            # Adds the items once more (untimed), then removes each once.
            run counting_remove "$redbloom" "${args[@]}" bench --op remove --items "$single" --concurrency 64
        fi
        "$redbloom" "${args[@]}" clear >/dev/null
        run "${kind}_load" "$redbloom" "${args[@]}" load "$items"
        run "${kind}_check" "$redbloom" "${args[@]}" check "$items"
        run "${kind}_absent" "$redbloom" "${args[@]}" check "$absent"
        if [ "$kind" = counting ]; then
            run counting_unload "$redbloom" "${args[@]}" unload "$items"
            run counting_after_unload "$redbloom" "${args[@]}" info
        fi
    done
done

# 2. Memory, on a fresh server: each structure holds the same BULK items.
redis-cli -p "$port" flushall >/dev/null
before=$(used_memory "$port")
"$redbloom" "${plain[@]}" load "$items" >/dev/null
after=$(used_memory "$port")
record mem_plain "{}" bytes="$(memory_usage "$port" plain)" used_memory_delta=$((after - before))

before=$(used_memory "$port")
"$redbloom" "${counting[@]}" load "$items" >/dev/null
after=$(used_memory "$port")
info=$("$redbloom" "${counting[@]}" info)
counters=$(field "$info" bits)
record mem_counting "{}" bytes="$(memory_usage "$port" cnt)" used_memory_delta=$((after - before)) \
    params_bytes="$(memory_usage "$port" '{cnt}:redbloom:3:cnt:params')" counters="$counters" \
    k="$(field "$info" k)" in_use="$(field "$info" counters_in_use)" \
    saturated="$(field "$info" counters_saturated)"

# rueidisprob's key name for a counting filter NAME is {NAME}:cbf.
before=$(used_memory "$port")
built=$(python3 "$helper" hash "$port" cnt '{cnt}:cbf' "$counters")
after=$(used_memory "$port")
record mem_hash "$built" bytes="$(memory_usage "$port" '{cnt}:cbf')" \
    used_memory_delta=$((after - before)) info_in_use="$(field "$info" counters_in_use)"

# RedisBloom's cuckoo filter, on its own server.
if [ -f ../shared/tools/redisbloom-server.sh ]; then
    bloom_port=$(free_port)
    bash ../shared/tools/redisbloom-server.sh "$bloom_port" > "$out/redisbloom.log" 2>&1 || true
fi
if [ -n "$bloom_port" ] && redis-cli -p "$bloom_port" ping >/dev/null 2>&1; then
    # The smallest power of two B with 2 * bulk / (255 * B) <= 0.01.
    buckets=1
    while [ $((2 * bulk * 100)) -gt $((255 * buckets)) ]; do buckets=$((buckets * 2)); done
    for cf in sized default; do
        if [ "$cf" = sized ]; then
            reserve=(CF.RESERVE cf_sized $((2 * buckets)) BUCKETSIZE 2)
        else
            reserve=(CF.RESERVE cf_default "$bulk")
        fi
        before=$(used_memory "$bloom_port")
        python3 "$helper" cmd "$bloom_port" "${reserve[@]}" >/dev/null
        added=$(python3 "$helper" cf "$bloom_port" add "cf_$cf" "$items")
        after=$(used_memory "$bloom_port")
        cfinfo=$(python3 "$helper" cmd "$bloom_port" CF.INFO "cf_$cf" | python3 -c '
import json, sys
r = json.load(sys.stdin)
d = dict(zip(r[::2], r[1::2]))
print(", ".join(f"{k.lower()} {d[k]}" for k in ["Size", "Number of buckets", "Bucket size", "Number of filters", "Number of items inserted"]))')
        record "mem_cf_$cf" "{}" name="RedisBloom cuckoo, ${reserve[*]}" \
            bytes="$(memory_usage "$bloom_port" "cf_$cf")" used_memory_delta=$((after - before)) \
            info="$cfinfo" add_items_per_sec="$(field "$added" items_per_sec)" \
            errors="$(field "$added" errors)"
        run "cf_${cf}_absent" python3 "$helper" cf "$bloom_port" exists "cf_$cf" "$absent"
    done
else
    why="did not start (see $out/redisbloom.log)"
    [ -f ../shared/tools/redisbloom-server.sh ] || why="../shared/tools/redisbloom-server.sh not found"
    echo "RedisBloom $why: no cuckoo filter rows"
    record cf_missing "{}" reason="$why"
fi

python3 "$helper" summary "$results"
