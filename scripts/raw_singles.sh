#!/usr/bin/env bash
# Single-item calls against the same commands sent by hand (issue 24; BENCHMARKS.md "Single
# calls against raw commands"): for a go-zero filter (1,000,000 items at 0.01), 64 tasks of
# single-item calls and 4 tasks of batches of 64, the same items, through redbloom
# (`redbloom bench`) and raw (benches/peers.rs `bitfield`: `BITFIELD SET u1` / `BITFIELD_RO GET
# u1` of go-zero's offsets, the tasks sharing one connection, nothing recorded), and redbloom's
# single adds with --inexact-retries (no records either); alternating, ROUNDS times, against one
# private redis-server (FLUSHALL before each run; an `exists` run checks the ITEMS items just
# added). Prints the median items/s and µs of server CPU per item (INFO cpu around the run) of
# each, and how near each one's single calls come to its own batches.
# Usage: scripts/raw_singles.sh REDBLOOM_BIN [ROUNDS] [ITEMS]
set -euo pipefail
bin=$1 rounds=${2:-3} items=${3:-200000}
cd "$(dirname "$0")/.."
cargo bench --no-run --quiet -p redbloom --bench peers 2>/dev/null
peers=$(ls -t "${CARGO_TARGET_DIR:-target}"/release/deps/peers-* | grep -v '\.d$' | head -1)
. scripts/private_redis.sh
results=$(mktemp)
trap 'rm -f "$results"; cli shutdown nosave >/dev/null 2>&1 || true' EXIT
url="redis://127.0.0.1:$port"
flags=(--key g --capacity 1000000 --fpr 0.01)
# The filter's size in bits, as redbloom makes it (the raw client sends the same offsets).
"$bin" --url "$url" "${flags[@]}" add sizing > /dev/null
bits=$("$bin" --url "$url" "${flags[@]}" --json info | python3 -c 'import json,sys; print(json.load(sys.stdin)["bits"])')

# run LABEL OP CMD...: FLUSHALL (and for `exists`, ITEMS items added), then one timed run.
run() {
    local label=$1 op=$2
    shift 2
    cli flushall > /dev/null
    if [ "$op" = exists ]; then
        "$bin" --url "$url" "${flags[@]}" bench --op add --items "$items" --concurrency 4 \
            --batch 1000 > /dev/null
    fi
    timed "$results" "$label" "$items" "$@"
}

for _ in $(seq "$rounds"); do
    for op in add exists; do
        run "$op|raw 1x64" "$op" "$peers" bitfield "$url" g "$bits" "$op" "$items" 1 64
        run "$op|raw 64x4" "$op" "$peers" bitfield "$url" g "$bits" "$op" "$items" 64 4
        run "$op|redbloom 1x64" "$op" "$bin" --url "$url" "${flags[@]}" --json bench --op "$op" \
            --items "$items" --concurrency 64 --batch 1
        run "$op|redbloom 64x4" "$op" "$bin" --url "$url" "${flags[@]}" --json bench --op "$op" \
            --items "$items" --concurrency 4 --batch 64
        if [ "$op" = add ]; then
            run "$op|redbloom --inexact-retries 1x64" "$op" "$bin" --url "$url" "${flags[@]}" \
                --inexact-retries --json bench --op add --items "$items" --concurrency 64 --batch 1
        fi
    done
done
python3 - "$results" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    label, rate, cpu = line.rstrip("\n").split("\t")
    rows.setdefault(label, []).append((float(rate), float(cpu)))
med = {l: (statistics.median(r for r, _ in v), statistics.median(c for _, c in v)) for l, v in rows.items()}
print("| op | client | 1x64: items/s, µs/item | 64x4: items/s, µs/item | 1x64 / 64x4: items/s, CPU | 1x64 / raw 1x64: items/s, CPU |")
print("|---|---|---|---|---|---|")
for op in ("add", "exists"):
    raw = med[f"{op}|raw 1x64"]
    for client, single, batch in (("raw", "raw 1x64", "raw 64x4"), ("redbloom", "redbloom 1x64", "redbloom 64x4"), ("redbloom --inexact-retries", "redbloom --inexact-retries 1x64", "redbloom 64x4")):
        if f"{op}|{single}" not in med:
            continue
        s, b = med[f"{op}|{single}"], med[f"{op}|{batch}"]
        print(f"| {op} | {client} | {s[0]:,.0f}, {s[1]:.2f} | {b[0]:,.0f}, {b[1]:.2f} | {s[0]/b[0]:.2f}x, {s[1]/b[1]:.2f}x | {s[0]/raw[0]:.2f}x, {s[1]/raw[1]:.2f}x |")
PY
