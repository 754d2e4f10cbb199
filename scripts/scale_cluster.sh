#!/usr/bin/env bash
# Issue 56's cluster run: ITEMS distinct lines (default 10^8) into a native filter at 10^-6 sized
# for them, on one redis-server and on a private 3-master Redis Cluster (no replicas) with
# `--shards 6`, each by `build` + `import` and by `load` (LOAD_ITEMS of the lines, default all),
# one after the other; wall time and peak RSS of each command (`/usr/bin/time`), then a `check`
# of 10^6 of the items on both.
# Usage: scripts/scale_cluster.sh [ITEMS] [LOAD_ITEMS]      (results in BENCHMARKS.md)
set -euo pipefail
cd "$(dirname "$0")/.."
items=${1:-100000000}
load_items=${2:-$items}
out=target/scale-cluster
rm -rf "$out"; mkdir -p "$out"
cargo build --release --quiet -p redbloom-cli --bin redbloom
redbloom=$PWD/target/release/redbloom

source scripts/private_cluster.sh
start_nodes "$out" 3 1      # 3 masters, then the single server
make_cluster 0
single="redis://127.0.0.1:${ports[3]}"

seq 100000000 $((100000000 + items - 1)) > "$out/items.txt"
head -n "$load_items" "$out/items.txt" > "$out/load.txt"
head -n 1000000 "$out/items.txt" > "$out/check.txt"
size=(--layout native --capacity "$items" --fpr 0.000001)
timed() { /usr/bin/time -f "$1: %e s wall, %U s user, %S s sys, peak RSS %M KiB" "${@:2}"; }
flush() { for p in "${ports[@]}"; do redis-cli -p "$p" flushall > /dev/null; done; }

echo "--- build + import, one server"
timed "build" "$redbloom" --key one "${size[@]}" build "$out/items.txt" --out "$out/one.rbloom"
timed "import" "$redbloom" --url "$single" --key one "${size[@]}" import "$out/one.rbloom"
echo "--- build + import, 3-master cluster, --shards 6"
timed "build" "$redbloom" --key six --shards 6 "${size[@]}" build "$out/items.txt" --out "$out/six.rbloom"
timed "import" "$redbloom" --cluster "$seeds" --key six --shards 6 "${size[@]}" import "$out/six.rbloom"
for p in "${ports[@]:0:3}"; do echo "node $p: $(redis-cli -p "$p" info memory | grep used_memory_human)"; done
echo "check, one server: $("$redbloom" --url "$single" --key one "${size[@]}" check "$out/check.txt")"
echo "check, cluster:    $("$redbloom" --cluster "$seeds" --key six --shards 6 "${size[@]}" check "$out/check.txt")"
rm -f "$out"/*.rbloom
flush
echo "--- load of $load_items lines, one server"
timed "load" "$redbloom" --url "$single" --key one "${size[@]}" load "$out/load.txt"
echo "--- load of $load_items lines, 3-master cluster, --shards 6"
timed "load" "$redbloom" --cluster "$seeds" --key six --shards 6 "${size[@]}" load "$out/load.txt"
