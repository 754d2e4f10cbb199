# Sourced by the benchmark scripts: a private redis-server (no persistence) on a free loopback
# port, shut down when the script exits. Defines `port`, `cli` (redis-cli to it) and `cpu`
# (the server's user + sys CPU seconds so far, from INFO cpu).
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes --logfile /dev/null
trap 'redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true' EXIT
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
cli() { redis-cli -p "$port" "$@"; }
cpu() { cli info cpu | grep -E "used_cpu_(user|sys):" | cut -d: -f2 | tr -d '\r' | paste -sd+ | bc; }
