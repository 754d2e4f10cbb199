#!/usr/bin/env bash
# Concurrent loaders of one growing filter (BENCHMARKS.md "Concurrent loaders of one growing
# filter"): N `redbloom load`s of 1,000,000 distinct items each (ITEMS=n: n each), at once, into one filter
# (--growth 2 --capacity 10000 --fpr 0.01), for BASE then NEW, N = 2 and 4, against one private
# redis-server (FLUSHALL before each run). Prints each load's seconds and exit status, the
# run's wall time, the server's EVALSHA calls (the per-item add script) and their time, and the
# longest command or transaction it ran (SLOWLOG: the longest merge).
# Each load gives up after 200 s.
# Usage: scripts/growing_loaders.sh BASE_BIN NEW_BIN     (LOADERS="2 4": the counts of loaders;
# FLAGS="--counting --capacity 1000000 --fpr 0.01": another filter than the growing one;
# REPLICA=1: a replica of the server too, for FLAGS with --wait-replicas 1)
set -euo pipefail
base=$1 new=$2
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes --logfile /dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"; redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true' EXIT
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
if [ -n "${REPLICA:-}" ]; then
    rport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    # Both servers' files (the full sync's RDB) in the scratch directory.
    redis-cli -p "$port" config set dir "$tmp" >/dev/null
    redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
        --logfile /dev/null --dir "$tmp" --replicaof 127.0.0.1 "$port"
    trap 'rm -rf "$tmp"; redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true; redis-cli -p "$rport" shutdown nosave >/dev/null 2>&1 || true' EXIT
    for _ in $(seq 100); do
        redis-cli -p "$rport" info replication | grep -q 'master_link_status:up' && break
        sleep 0.1
    done
fi
items=${ITEMS:-1000000}
for i in 1 2 3 4; do seq "$items" | sed "s/^/l$i:/" > "$tmp/items$i"; done
redis-cli -p "$port" config set slowlog-log-slower-than 1000 >/dev/null
redis-cli -p "$port" config set slowlog-max-len 100000 >/dev/null
for n in ${LOADERS:-2 4}; do
    for label in base new; do
        bin=$base
        [ "$label" = new ] && bin=$new
        redis-cli -p "$port" flushall >/dev/null
        redis-cli -p "$port" config resetstat >/dev/null
        redis-cli -p "$port" slowlog reset >/dev/null
        start=$(date +%s.%N)
        for i in $(seq "$n"); do
            (
                # shellcheck disable=SC2086
                out=$(timeout 200 "$bin" --url "redis://127.0.0.1:$port" --key grow \
                    ${FLAGS:---growth 2 --capacity 10000 --fpr 0.01} --json load "$tmp/items$i" \
                    2>&1) && code=0 || code=$?
                echo "$out exit=$code" > "$tmp/out$i"
            ) &
        done
        wait
        end=$(date +%s.%N)
        echo "== $label, $n loaders: wall $(echo "$end - $start" | bc) s"
        for i in $(seq "$n"); do cat "$tmp/out$i"; done
        redis-cli -p "$port" info commandstats | grep -E '^cmdstat_evalsha:' | cut -d, -f1-3 || echo "no EVALSHA"
        # Each SLOWLOG entry opens with [id,time,duration µs,[args: the longest of the run.
        echo "longest command: $(redis-cli -p "$port" --json slowlog get 100000 \
            | grep -oE '\[[0-9]+,[0-9]+,[0-9]+,\[' | cut -d, -f3 | sort -n | tail -1) µs"
    done
done
