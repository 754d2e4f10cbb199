# Sourced by the benchmark scripts that need a Redis Cluster: private redis-servers on loopback
# (no persistence), shut down when the script exits.
#   start_nodes DIR CLUSTERED PLAIN [ARGS...]: CLUSTERED cluster-enabled servers, then PLAIN
#     plain ones, each given ARGS, each with its directory and log under DIR; their ports in
#     `ports`, the cluster's first. (A cluster node's bus port, its port + 10000, is free too.)
#   make_cluster REPLICAS: `redis-cli --cluster create` of the cluster-enabled servers with
#     REPLICAS replicas per master; waits for `cluster_state:ok`; `seeds` names the first two.
# NODE_TIMEOUT: the nodes' cluster-node-timeout in ms (default 5000).
ports=()
clustered=()
pick_port() {
    python3 -c '
import socket
while True:
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]
    if p < 55000:
        t = socket.socket()
        try:
            t.bind(("127.0.0.1", p + 10000)); print(p); break
        except OSError:
            pass'
}
stop_nodes() { for p in "${ports[@]}"; do redis-cli -p "$p" shutdown nosave >/dev/null 2>&1 || true; done; }
trap stop_nodes EXIT
start_nodes() {
    local dir=$1 n_clustered=$2 n_plain=$3 i p
    shift 3
    for ((i = 0; i < n_clustered + n_plain; i++)); do
        p=$(pick_port); ports+=("$p"); mkdir -p "$dir/$p"
        local extra=()
        if ((i < n_clustered)); then
            clustered+=("$p")
            extra=(--cluster-enabled yes --cluster-config-file nodes.conf
                --cluster-node-timeout "${NODE_TIMEOUT:-5000}")
        fi
        redis-server --port "$p" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
            --dir "$PWD/$dir/$p" --logfile "$PWD/$dir/$p/log" "${extra[@]}" "$@"
    done
    for p in "${ports[@]}"; do
        for _ in $(seq 50); do redis-cli -p "$p" ping >/dev/null 2>&1 && break; sleep 0.1; done
    done
}
make_cluster() {
    local nodes=() p
    for p in "${clustered[@]}"; do nodes+=("127.0.0.1:$p"); done
    redis-cli --cluster create "${nodes[@]}" --cluster-replicas "$1" --cluster-yes > /dev/null
    for _ in $(seq 100); do
        redis-cli -p "${clustered[0]}" cluster info | grep -q cluster_state:ok && break
        sleep 0.2
    done
    seeds="redis://127.0.0.1:${clustered[0]},redis://127.0.0.1:${clustered[1]}"
}
