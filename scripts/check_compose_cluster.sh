#!/usr/bin/env bash
# Checks docker-compose.yml's `cluster` profile without Docker, by running the compose file's own
# command lines with the local redis-server / redis-cli:
#   - the YAML parses (anchors, `<<` merges) and every cluster service has what compose needs;
#   - each node's `command` starts a cluster node (own temporary working dir, like its own /data);
#   - each node's healthcheck passes ($$PORT read as compose does), with the YAML's interval/retries;
#   - cluster-create's `sh -c "..."` (split into argv as compose does) builds 3 masters + 3 replicas,
#     and a second run exits 0 without trying to create again;
#   - every node reaches cluster_state:ok; the time until replicas show in CLUSTER SLOTS is reported;
#   - the docs/cluster.md example: redbloom --cluster ... --shards 8 load/check of 100,000 items.
# It cannot check the image (redis:7-alpine, its entrypoint, its redis version and its patched
# defaults such as protected-mode), the container runtime (compose's scheduling, healthcheck
# timing, /data volumes) or host networking (network_mode: host, the addresses nodes announce):
# here everything runs as local processes on 127.0.0.1 with the local Redis.
# Needs ports 7000-7005 and 17000-17005 free. Usage: scripts/check_compose_cluster.sh
set -euo pipefail
cd "$(dirname "$0")/.."

# 1. The cluster profile, as bash assignments (compose interpolation: `$$` is a literal `$`).
spec=$(python3 - <<'EOF'
import re, shlex, sys, yaml
def fail(msg): sys.exit(f"docker-compose.yml: {msg}")
def interp(s):
    if "$" in s.replace("$$", ""): fail(f"unescaped $ (host variable) in {s!r}")
    return s.replace("$$", "$")
def need(d, key, name):
    if key not in d: fail(f"service {name} has no `{key}`")
    return d[key]
def seconds(v):
    m = re.fullmatch(r"(\d+)s", str(v)) or fail(f"unsupported duration {v!r}")
    return int(m.group(1))
q = shlex.quote
services = need(yaml.safe_load(open("docker-compose.yml")), "services", "<top level>")
cluster = {n: s for n, s in services.items() if "cluster" in s.get("profiles", [])}
nodes = [n for n in cluster if n != "cluster-create"]
if len(nodes) != 6: fail(f"expected 6 cluster nodes, found {nodes}")
if "cluster-create" not in cluster: fail("no cluster-create service in the cluster profile")
for i, n in enumerate(nodes):
    s = cluster[n]
    cmd = need(s, "command", n)
    if not isinstance(cmd, list): fail(f"{n}: command is not a list")
    port = str(need(need(s, "environment", n), "PORT", n))
    hc = need(s, "healthcheck", n)
    test = need(hc, "test", n)
    if test[0] == "CMD-SHELL": test = ["sh", "-c", test[1]]
    elif test[0] == "CMD": test = test[1:]
    else: fail(f"{n}: healthcheck test {test!r}")
    print(f"node_name[{i}]={q(n)} node_port[{i}]={q(port)}")
    print(f"node_cmd_{i}=({' '.join(q(interp(str(a))) for a in cmd)})")
    print(f"node_health_{i}=({' '.join(q(interp(a)) for a in test)})")
    print(f"node_interval[{i}]={seconds(need(hc, 'interval', n))}")
    print(f"node_timeout[{i}]={seconds(need(hc, 'timeout', n))}")
    print(f"node_retries[{i}]={int(need(hc, 'retries', n))}")
create = cluster["cluster-create"]
deps = need(create, "depends_on", "cluster-create")
if sorted(deps) != sorted(nodes) or any(d.get("condition") != "service_healthy"
                                       for d in deps.values()):
    fail("cluster-create must depend on every node with condition service_healthy")
cmd = need(create, "command", "cluster-create")
argv = cmd if isinstance(cmd, list) else shlex.split(interp(cmd))  # compose: go-shellwords
print(f"create_cmd=({' '.join(q(a) for a in argv)})")
EOF
)
declare -a node_name node_port node_interval node_retries node_timeout
eval "$spec"
n=${#node_name[@]}
echo "profile cluster: ${node_name[*]} + cluster-create"

# 2. Refuse to run next to something already on the nodes' ports or their cluster bus ports.
python3 - "${node_port[@]}" <<'EOF'
import socket, sys
busy = []
for p in [int(p) for p in sys.argv[1:]] + [int(p) + 10000 for p in sys.argv[1:]]:
    for family, host in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
        s = socket.socket(family)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT is not "in use"
        try:
            s.bind((host, p))
        except OSError:
            busy.append(p); break
        finally:
            s.close()
if busy: sys.exit(f"ports in use: {busy}; stop what listens there first")
EOF

# 3. Start the nodes, each in its own working directory; stop them and clean up on exit.
tmp=$(mktemp -d); pids=()
cleanup() {
    status=$?
    for p in "${node_port[@]}"; do redis-cli -p "$p" shutdown nosave >/dev/null 2>&1 || true; done
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
    if [ "$status" != 0 ]; then
        for d in "$tmp"/node-*; do [ -f "$d/log" ] && { echo "--- $d/log"; tail -n 5 "$d/log"; }; done
        echo "FAILED (exit $status)"
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT
for ((i = 0; i < n; i++)); do
    declare -n cmd="node_cmd_$i"
    mkdir "$tmp/node-$i"
    (cd "$tmp/node-$i" && PORT=${node_port[i]} exec "${cmd[@]}" >log 2>&1) &
    pids+=($!)
done

# 4. Healthchecks, as compose's depends_on: service_healthy waits for them (first probe after
#    one interval; unhealthy after `retries` failures).
healthy() {  # node index; probes like compose: first one interval after start
    declare -n health="node_health_$1"
    for ((try = 1; try <= node_retries[$1]; try++)); do
        sleep "${node_interval[$1]}"
        PORT=${node_port[$1]} timeout "${node_timeout[$1]}" "${health[@]}" >/dev/null 2>&1 && return
    done
    echo "${node_name[$1]}: healthcheck never passed"; return 1
}
probes=(); for ((i = 0; i < n; i++)); do healthy "$i" & probes+=($!); done
for pid in "${probes[@]}"; do wait "$pid"; done
echo "healthchecks: all ${n} nodes healthy"

# 5. cluster-create, twice: the second run must exit 0 without creating again.
if ! out=$("${create_cmd[@]}" 2>&1); then echo "$out"; echo "cluster-create failed"; exit 1; fi
created=$(date +%s.%N)
echo "cluster-create (1st run): $(sed 's/\x1b\[[0-9;]*m//g' <<<"$out" | grep . | tail -n 1)"
if ! again=$("${create_cmd[@]}" 2>&1) || grep -q '>>>' <<<"$again"; then
    echo "$again"; echo "cluster-create (2nd run) failed or tried to create again"; exit 1
fi
echo "cluster-create (2nd run): exit 0, output: '${again}'"

# 6. Every node ok; 3 masters, 3 replicas; replicas listed in CLUSTER SLOTS (timed).
for p in "${node_port[@]}"; do
    for ((t = 0; ; t++)); do
        redis-cli -p "$p" cluster info | grep -q '^cluster_state:ok' && break
        [ "$t" -lt 100 ] || { echo "node $p: cluster_state never ok"; exit 1; }
        sleep 0.2
    done
done
roles=$(for p in "${node_port[@]}"; do redis-cli -p "$p" role | head -n 1; done | sort | uniq -c | xargs)
[ "$roles" = "3 master 3 slave" ] || { echo "roles: $roles"; exit 1; }
echo "cluster_state:ok on all nodes; roles: $roles"
listed() {  # the fewest distinct node ports any node lists in CLUSTER SLOTS
    for p in "${node_port[@]}"; do
        redis-cli -p "$p" cluster slots | grep -xF -f <(printf '%s\n' "${node_port[@]}") | sort -u | wc -l
    done | sort -n | head -n 1
}
t=0
while [ "$(listed)" -lt "$n" ]; do
    [ $((t += 1)) -le 300 ] || { echo "replicas still missing from CLUSTER SLOTS after 30 s"; exit 1; }
    sleep 0.1
done
replicas_after=$(python3 -c "print(f'{$(date +%s.%N) - $created:.1f}')")
echo "replicas in every node's CLUSTER SLOTS ${replicas_after} s after cluster-create finished"

# 7. The docs/cluster.md example, 100,000 items: load, then check them all.
cargo build --release --quiet -p redbloom-cli --bin redbloom
seq 1 100000 | sed 's/^/https:\/\/example.com\/page\//' > "$tmp/urls.txt"
bloom=(target/release/redbloom --cluster redis://127.0.0.1:7000,redis://127.0.0.1:7001 --key seen
    --shards 8 --capacity 100000 --fpr 0.01 --json)
load=$("${bloom[@]}" load "$tmp/urls.txt")
check=$("${bloom[@]}" check "$tmp/urls.txt") || true  # exit 1 when an item is absent
present=$(python3 -c 'import json, sys; print(json.loads(sys.argv[1])["present"])' "$check")
[ "$present" = 100000 ] || { echo "check: $check"; echo "expected 100000 present"; exit 1; }
echo "load:  $load"
echo "check: $check"

# 8. Summary.
echo "OK: cluster profile of docker-compose.yml: ${n} nodes healthy, cluster-create ran twice" \
    "(idempotent), 3 masters + 3 replicas, replicas in CLUSTER SLOTS after ${replicas_after} s," \
    "docs/cluster.md example: 100000/100000 present"
