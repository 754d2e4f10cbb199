#!/usr/bin/env bash
# `redbloom --cluster SEEDS --shards 8` against a private 3-master, 3-replica Redis Cluster on
# loopback: load and check of ITEMS items (default 1,000,000), the false-positive rate on as many
# absent items next to the formula, and the same load/check on one plain redis-server.
# Usage: scripts/bench_cluster.sh [ITEMS]      (results in BENCHMARKS.md)
set -euo pipefail
cd "$(dirname "$0")/.."
items=${1:-1000000}
out=target/bench-cluster
rm -rf "$out"; mkdir -p "$out"
cargo build --release --quiet -p redbloom-cli --bin redbloom
redbloom=target/release/redbloom

source scripts/private_cluster.sh
NODE_TIMEOUT=2000 start_nodes "$out" 6 1   # the seventh: the plain single server
make_cluster 1
sleep 2
single="redis://127.0.0.1:${ports[6]}"

seq 0 $((items - 1)) | sed 's/^/item:/' > "$out/items.txt"
seq 0 $((items - 1)) | sed 's/^/absent:/' > "$out/absent.txt"
size=(--key crawler --capacity "$items" --fpr 0.01 --json)
echo "--- Redis Cluster, 3 masters + 3 replicas, --shards 8"
echo "load:   $($redbloom --cluster "$seeds" --shards 8 "${size[@]}" load "$out/items.txt")"
echo "check:  $($redbloom --cluster "$seeds" --shards 8 "${size[@]}" check "$out/items.txt")"
echo "absent: $($redbloom --cluster "$seeds" --shards 8 "${size[@]}" check "$out/absent.txt")"
echo "info:   $($redbloom --cluster "$seeds" --shards 8 "${size[@]}" info)"
# Replicas are listed in CLUSTER SLOTS (so clients route reads to them) once their offset moved.
cluster_ports=$(IFS='|'; echo "${ports[*]:0:6}")
for _ in $(seq 100); do
    [ "$(redis-cli -p "${ports[0]}" cluster slots | grep -cxE "$cluster_ports")" -ge 6 ] && break
    sleep 0.2
done
for p in "${ports[@]:0:6}"; do
    echo "node $p: $(redis-cli -p "$p" role | head -1), $(redis-cli -p "$p" dbsize) keys"
    redis-cli -p "$p" config resetstat > /dev/null
done
# Read calls (BITFIELD_RO, GETRANGE) each node served since its statistics were reset.
reads() {
    for p in "${ports[@]:0:6}"; do
        calls=$(redis-cli -p "$p" info commandstats | { grep -E '^cmdstat_(bitfield_ro|getrange):' || true; } |
            awk -F'calls=' '{ split($2, n, ","); sum += n[1] } END { print sum + 0 }')
        printf '%s %s=%s ' "$(redis-cli -p "$p" role | head -1)" "$p" "$calls"
        redis-cli -p "$p" config resetstat > /dev/null
    done
    echo
}
echo "--- the same cluster, checks served by the replicas (--read-from-replicas)"
echo "check:  $($redbloom --cluster "$seeds" --shards 8 --read-from-replicas "${size[@]}" check "$out/items.txt")"
echo "absent: $($redbloom --cluster "$seeds" --shards 8 --read-from-replicas "${size[@]}" check "$out/absent.txt")"
echo "read calls: $(reads)"
echo "--- single-item checks, 64 tasks on one client (bench), masters and replicas in turn"
bench=(--key blocklist --bits 16777216 --json bench --items 200000 --concurrency 64)
$redbloom --cluster "$seeds" "${bench[@]}" --op add > /dev/null
reads > /dev/null
for round in 1 2 3; do   # alternating, so that drift in the machine's speed hits both alike
    echo "masters:  $($redbloom --cluster "$seeds" "${bench[@]}" --op exists)"
    echo "read calls: $(reads)"
    echo "replicas: $($redbloom --cluster "$seeds" --read-from-replicas "${bench[@]}" --op exists)"
    echo "read calls: $(reads)"
done
echo "--- one redis-server, one key"
echo "load:   $($redbloom --url "$single" "${size[@]}" load "$out/items.txt")"
echo "check:  $($redbloom --url "$single" "${size[@]}" check "$out/items.txt")"
echo "absent: $($redbloom --url "$single" "${size[@]}" check "$out/absent.txt")"
python3 -c "
import math
n, p, k = $items, 0.01, 14
m = math.ceil(-k * n / math.log(1 - p ** (1 / k)))
print('formula: bits %d, expected false-positive rate %.4f%% (go-zero layout, k = 14)' % (m, 100 * (1 - math.exp(-k * n / m)) ** k))"
