#!/usr/bin/env bash
# What each way of touching the go-zero layout's 14 bits costs the Redis server (BENCHMARKS.md):
#  1. server CPU per item (INFO cpu around a redis-cli --pipe stream, so protocol parsing is
#     included) for go-zero's Lua scripts and for BITFIELD, single items and batches of 100, on
#     a 20,000,000-bit filter half full;
#  2. server time per dense-path call (INFO commandstats) while `redbloom load`/`check` run
#     1,000,000 items into filters of 1.4 MB and 4.1 MB.
# Usage: scripts/server_cost.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet -p redbloom-cli --bin redbloom
. scripts/private_redis.sh
tmp=$(mktemp -d); trap 'rm -rf "$tmp"; redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true' EXIT

load() { cli script load "$(cat "lua/$1.lua")"; }
add=$(load add); exists=$(load exists); add_many=$(load add_many); exists_many=$(load exists_many)
python3 scripts/resp_stream.py bfset 1000000 100 > "$tmp/fill"
cli --pipe < "$tmp/fill" > /dev/null
echo "filter: $(cli bitcount f) of 20000000 bits set"
measure() { # label mode items batch [sha]
    python3 scripts/resp_stream.py "$2" "$3" "$4" "${5:-}" > "$tmp/cmds"
    local before after
    before=$(cpu); cli --pipe < "$tmp/cmds" > /dev/null; after=$(cpu)
    python3 -c "c=$after-$before; print('%-34s %6.2f us of server CPU per item (%7.0f items/s per core)' % ('$1', c*1e6/$3, $3/c))"
}
measure "Lua add (go-zero set script)" lua 100000 1 "$add"
measure "BITFIELD SET u1 x14" bfset 100000 1
measure "Lua exists (go-zero test script)" lua 100000 1 "$exists"
measure "BITFIELD_RO GET u1 x14" bfget 100000 1
measure "Lua add_many, 100 per call" lua 200000 100 "$add_many"
measure "BITFIELD SET, 100 items per call" bfset 200000 100
measure "Lua exists_many, 100 per call" lua 200000 100 "$exists_many"
measure "BITFIELD_RO GET, 100 items per call" bfget 200000 100

seq 0 999999 | sed 's/^/item:/' > "$tmp/items"
for capacity in 1000000 3000000; do
    cli flushall > /dev/null
    size=(--url "redis://127.0.0.1:$port" --key dense --capacity "$capacity" --fpr 0.01 --json)
    cli config resetstat > /dev/null
    target/release/redbloom "${size[@]}" load "$tmp/items" > /dev/null
    echo "dense merge, $(cli strlen dense) bytes: $(cli info commandstats | grep -E '^cmdstat_exec:' | sed 's/,rejected.*//')"
    cli config resetstat > /dev/null
    target/release/redbloom "${size[@]}" check "$tmp/items" > /dev/null
    echo "dense read,  $(cli strlen dense) bytes: $(cli info commandstats | grep -E '^cmdstat_getrange:' | sed 's/,rejected.*//')"
done
