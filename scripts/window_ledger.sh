#!/usr/bin/env bash
# The window ledger's cost (issue 23, BENCHMARKS.md "Lost window generations"): checks of items
# that are absent (each call reads the ledger and EXISTS the generations it lists) from 64 tasks
# of single items and 4 tasks of batches of 64, and single adds, with BASE (before the ledger)
# and NEW, alternating, ROUNDS times, against one private redis-server (FLUSHALL, then 10,000
# other items loaded, before each run). Prints the median items/s and µs of server CPU per
# item (INFO cpu around the run) of each.
# Usage: scripts/window_ledger.sh BASE_BIN NEW_BIN [ROUNDS] [ITEMS]
set -euo pipefail
base=$1 new=$2 rounds=${3:-3} items=${4:-200000}
. "$(dirname "$0")/private_redis.sh"
results=$(mktemp)
flags=(--window 1h --capacity 1000000 --fpr 0.01)

# run LABEL BIN OP CONCURRENCY BATCH: one timed run; appends "LABEL items/s us/item"
run() {
    local label=$1 bin=$2 op=$3 conc=$4 batch=$5
    cli flushall > /dev/null
    seq 10000 | sed 's/^/other:/' | "$bin" --url "redis://127.0.0.1:$port" --key w "${flags[@]}" load - > /dev/null
    timed "$results" "$label" "$items" "$bin" --url "redis://127.0.0.1:$port" --key w --json \
        "${flags[@]}" bench --op "$op" --items "$items" --concurrency "$conc" --batch "$batch"
}

for _ in $(seq "$rounds"); do
    for what in "exists absent 1x64|exists 64 1" "exists absent 64x4|exists 4 64" "add 1x64|add 64 1"; do
        read -r op conc batch <<< "${what#*|}"
        run "${what%%|*}|base" "$base" "$op" "$conc" "$batch"
        run "${what%%|*}|new" "$new" "$op" "$conc" "$batch"
    done
done
python3 - "$results" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    label, rate, cpu = line.rstrip("\n").split("\t")
    rows.setdefault(label, []).append((float(rate), float(cpu)))
print("| window op | base: items/s, µs/item | new: items/s, µs/item | new / base: items/s, CPU |")
print("|---|---|---|---|")
for name in dict.fromkeys(label.split("|")[0] for label in rows):
    b, n = [(statistics.median(r for r, _ in rows[f"{name}|{v}"]), statistics.median(c for _, c in rows[f"{name}|{v}"])) for v in ("base", "new")]
    print(f"| {name} | {b[0]:,.0f}, {b[1]:.2f} | {n[0]:,.0f}, {n[1]:.2f} | {n[0]/b[0]:.2f}x, {n[1]/b[1]:.2f}x |")
PY
rm -f "$results"
