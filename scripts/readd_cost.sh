#!/usr/bin/env bash
# Adds of items a filter already holds (a dedup stream's repeats): for each kind, ITEMS items
# loaded first (`bench --op add --batch 1000`), then the same items added again by 64 tasks'
# single calls (`bench --op add --concurrency 64`, group commit), with BASE and NEW
# alternating, ROUNDS times, against one private redis-server (FLUSHALL before each run).
# Prints the median items/s, µs of server CPU per item (INFO cpu) and the server's writes per
# item (rdb_changes_since_last_save: every command that changed a key, records included).
# Usage: scripts/readd_cost.sh BASE_BIN NEW_BIN [ROUNDS] [ITEMS]
set -euo pipefail
base=$1 new=$2 rounds=${3:-3} items=${4:-200000}
. "$(dirname "$0")/private_redis.sh"
changes() { cli info persistence | grep rdb_changes_since_last_save | cut -d: -f2 | tr -d '\r'; }
results=$(mktemp)
kinds=(
    "go-zero|--capacity 1000000 --fpr 0.01"
    "native|--layout native --capacity 1000000 --fpr 0.01"
    "window|--window 1h --capacity 1000000 --fpr 0.01"
    "growing|--growth 2 --capacity 100000 --fpr 0.01"
)
for _ in $(seq "$rounds"); do
    for entry in "${kinds[@]}"; do
        kind=${entry%%|*}
        read -r -a flags <<< "${entry#*|}"
        for which in base new; do
            bin=$base
            [ "$which" = new ] && bin=$new
            cli flushall > /dev/null
            "$bin" --url "redis://127.0.0.1:$port" --key b "${flags[@]}" bench --op add \
                --items "$items" --concurrency 4 --batch 1000 > /dev/null
            c0=$(cpu) w0=$(changes)
            out=$("$bin" --url "redis://127.0.0.1:$port" --key b --json "${flags[@]}" bench \
                --op add --items "$items" --concurrency 64 --batch 1)
            c1=$(cpu) w1=$(changes)
            python3 -c 'import json,sys; o=json.loads(sys.argv[1]); n=int(sys.argv[2]); rate=o["items_per_sec"]; print(f"{sys.argv[3]}\t{rate:.0f}\t{(float(sys.argv[5])-float(sys.argv[4]))*1e6/n:.2f}\t{(int(sys.argv[7])-int(sys.argv[6]))/n:.3f}")' \
                "$out" "$items" "$kind|$which" "$c0" "$c1" "$w0" "$w1" >> "$results"
        done
    done
done
python3 - "$results" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    label, rate, cpu, writes = line.rstrip("\n").split("\t")
    rows.setdefault(label, []).append((float(rate), float(cpu), float(writes)))
print("| kind | base: items/s, µs/item, writes/item | new: items/s, µs/item, writes/item | new / base items/s |")
print("|---|---|---|---|")
med = {k: tuple(statistics.median(r[i] for r in v) for i in range(3)) for k, v in rows.items()}
for kind in dict.fromkeys(k.split("|")[0] for k in rows):
    b, n = med[f"{kind}|base"], med[f"{kind}|new"]
    print(f"| {kind} | {b[0]:,.0f}, {b[1]:.2f}, {b[2]:.3f} | {n[0]:,.0f}, {n[1]:.2f}, {n[2]:.3f} | {n[0]/b[0]:.2f}x |")
PY
