#!/usr/bin/env bash
# Explicit batches into a growing filter (BENCHMARKS.md "Batches of a few hundred into large
# levels"): `bench --op add --concurrency 4 --batch B` of ITEMS items with BASE and NEW, for each
# first level (--capacity) and batch size, alternating, ROUNDS times, against one private
# redis-server (FLUSHALL before each run). Prints the median items/s and µs of server CPU per
# item (INFO cpu around the run) of each, and NEW / BASE.
# Usage: scripts/growing_batches.sh BASE_BIN NEW_BIN [ROUNDS] [ITEMS]
# CAPACITIES="100000 2000000" and BATCHES="64 256 1000 4000" choose the grid.
set -euo pipefail
base=$1 new=$2 rounds=${3:-3} items=${4:-200000}
. "$(dirname "$0")/private_redis.sh"
results=$(mktemp)

# run LABEL BIN CAPACITY BATCH: one timed run; appends "LABEL items/s us/item"
run() {
    local label=$1 bin=$2 capacity=$3 batch=$4
    cli flushall > /dev/null
    timed "$results" "$label" "$items" "$bin" --url "redis://127.0.0.1:$port" --key g --json \
        --growth 2 --capacity "$capacity" --fpr 0.01 bench --op add --items "$items" \
        --concurrency 4 --batch "$batch"
}

for _ in $(seq "$rounds"); do
    for capacity in ${CAPACITIES:-100000 2000000}; do
        for batch in ${BATCHES:-64 256 1000 4000}; do
            run "$capacity $batch|base" "$base" "$capacity" "$batch"
            run "$capacity $batch|new" "$new" "$capacity" "$batch"
        done
    done
done
python3 - "$results" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    label, rate, cpu = line.rstrip("\n").split("\t")
    rows.setdefault(label, []).append((float(rate), float(cpu)))
print("| --capacity, --batch | base: items/s, µs/item | new: items/s, µs/item | new / base: items/s, CPU |")
print("|---|---|---|---|")
names = []
for label in rows:
    name = label.split("|")[0]
    if name not in names:
        names.append(name)
for name in names:
    med = {}
    for variant in ("base", "new"):
        runs = rows[f"{name}|{variant}"]
        med[variant] = (statistics.median(r for r, _ in runs), statistics.median(c for _, c in runs))
    b, n = med["base"], med["new"]
    capacity, batch = name.split()
    print(f"| {int(capacity):,}, {int(batch):,} | {b[0]:,.0f}, {b[1]:.2f} | {n[0]:,.0f}, {n[1]:.2f} | {n[0]/b[0]:.2f}x, {n[1]/b[1]:.2f}x |")
PY
rm -f "$results"
