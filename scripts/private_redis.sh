# Sourced by the benchmark scripts: a private redis-server (no persistence) on a free loopback
# port, shut down when the script exits. Defines `port`, `cli` (redis-cli to it), `cpu`
# (the server's user + sys CPU seconds so far, from INFO cpu), `timed` and `seconds`.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes --logfile /dev/null
trap 'redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true' EXIT
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
cli() { redis-cli -p "$port" "$@"; }
cpu() { cli info cpu | grep -E "used_cpu_(user|sys):" | cut -d: -f2 | tr -d '\r' | paste -sd+ | bc; }
# timed RESULTS LABEL ITEMS CMD...: runs CMD (a `redbloom --json ... bench` of ITEMS items) and
# appends "LABEL<TAB>items/s<TAB>µs of server CPU per item" (INFO cpu around it) to RESULTS.
timed() {
    local results=$1 label=$2 items=$3
    shift 3
    local before after out
    before=$(cpu)
    out=$("$@")
    after=$(cpu)
    python3 - "$label" "$items" "$before" "$after" "$out" >> "$results" <<'PY'
import json, sys
label, items, before, after, out = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), json.loads(sys.argv[5])
print(f"{label}\t{out['items_per_sec']:.0f}\t{(after - before) * 1e6 / items:.2f}")
PY
}
# seconds: the "seconds" of a `redbloom --json` reply on stdin, to two decimals.
seconds() { python3 -c 'import json, sys; print(round(json.load(sys.stdin)["seconds"], 2))'; }
