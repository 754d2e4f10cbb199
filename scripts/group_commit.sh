#!/usr/bin/env bash
# Group commit (issue 24, BENCHMARKS.md "Group commit"): for each kind and op, 64 tasks of
# single-item calls (`bench --concurrency 64 --batch 1`) with BASE (a build before group
# commit) and NEW, and NEW's explicit batches of 64 from 4 tasks (`--batch 64 --concurrency
# 4`), the same items, alternating, ROUNDS times, against one private redis-server (FLUSHALL
# before each run; an `exists` run checks items the same build just added). Prints the median
# items/s and µs of server CPU per item (INFO cpu around the run) of each.
# Usage: scripts/group_commit.sh BASE_BIN NEW_BIN [ROUNDS] [ITEMS]
# ONLY=REGEX runs only the kinds/ops whose names match it; NEW_FLAGS="..." adds flags to NEW's
# runs (e.g. --inexact-retries, to compare without the records of exact answers); ABSENT=1
# makes an `exists` run check items that are not there (the filter loaded with as many others);
# GROWING_FLAGS="..." replaces the growing filter's flags (e.g. a smaller first level: more levels).
set -euo pipefail
base=$1 new=$2 rounds=${3:-3} items=${4:-200000}
. "$(dirname "$0")/private_redis.sh"
results=$(mktemp)
others=$(mktemp)
python3 -c "import sys; sys.stdout.write(''.join(f'other:{i}\\n' for i in range($items)))" > "$others"

# run LABEL BIN OP CONCURRENCY BATCH FLAGS...: one timed run; appends "LABEL items/s us/item"
run() {
    local label=$1 bin=$2 op=$3 conc=$4 batch=$5
    shift 5
    cli flushall > /dev/null
    if [ "$op" = exists ] && [ -n "${ABSENT:-}" ]; then
        "$bin" --url "redis://127.0.0.1:$port" --key b "$@" load "$others" > /dev/null
    elif [ "$op" = exists ]; then
        "$bin" --url "redis://127.0.0.1:$port" --key b "$@" bench --op add --items "$items" \
            --concurrency 4 --batch 1000 > /dev/null
    fi
    timed "$results" "$label" "$items" "$bin" --url "redis://127.0.0.1:$port" --key b --json "$@" \
        bench --op "$op" --items "$items" --concurrency "$conc" --batch "$batch"
}

kinds=(
    "go-zero|--capacity 1000000 --fpr 0.01"
    "native|--layout native --capacity 1000000 --fpr 0.01"
    "window|--window 1h --capacity 1000000 --fpr 0.01"
    "counting|--counting --capacity 1000000 --fpr 0.01"
    "growing|${GROWING_FLAGS:---growth 2 --capacity 100000 --fpr 0.01}"
)
for _ in $(seq "$rounds"); do
    for entry in "${kinds[@]}"; do
        kind=${entry%%|*}
        read -r -a flags <<< "${entry#*|}"
        for op in add exists; do
            name="$kind $op"
            [[ -z ${ONLY:-} || $name =~ $ONLY ]] || continue
            run "$name|base 1x64" "$base" "$op" 64 1 "${flags[@]}"
            read -r -a extra <<< "${NEW_FLAGS:-}"
            run "$name|new 1x64" "$new" "$op" 64 1 "${flags[@]}" "${extra[@]}"
            run "$name|new 64x4" "$new" "$op" 4 64 "${flags[@]}" "${extra[@]}"
        done
    done
done
python3 - "$results" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    label, rate, cpu = line.rstrip("\n").split("\t")
    rows.setdefault(label, []).append((float(rate), float(cpu)))
print("| kind op | base 1x64: items/s, µs/item | new 1x64: items/s, µs/item | new 64x4: items/s, µs/item | new 1x64 / base 1x64 | new 1x64 / new 64x4: items/s, CPU |")
print("|---|---|---|---|---|---|")
names = []
for label in rows:
    name = label.split("|")[0]
    if name not in names:
        names.append(name)
for name in names:
    med = {}
    for variant in ("base 1x64", "new 1x64", "new 64x4"):
        runs = rows.get(f"{name}|{variant}", [])
        med[variant] = (statistics.median(r for r, _ in runs), statistics.median(c for _, c in runs))
    b, n, x = med["base 1x64"], med["new 1x64"], med["new 64x4"]
    print(f"| {name} | {b[0]:,.0f}, {b[1]:.2f} | {n[0]:,.0f}, {n[1]:.2f} | {x[0]:,.0f}, {x[1]:.2f} | {n[0]/b[0]:.2f}x | {n[0]/x[0]:.2f}x, {n[1]/x[1]:.2f}x |")
PY
rm -f "$results" "$others"
