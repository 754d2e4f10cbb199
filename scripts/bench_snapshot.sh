#!/usr/bin/env bash
# Snapshots of a 512 MiB filter (SPEC.md §5, docs/snapshot-format.md), in one run on one machine:
# `redbloom export FILE`, then `import FILE` into another key of the same private redis-server,
# of a go-zero filter of 2^32 bits (one key of 512 MiB, the largest) holding
#  1. noise: 512 MiB of random bytes, set by SETRANGE (a filter near its best fill looks so):
#     every chunk stored raw, the largest file and the most work per byte;
#  2. ITEMS items loaded by `redbloom load` (default 2,000,000: 28 M of its 4.3 G bits set):
#     sparse chunks, stored LZ4.
# Then a second import over the first copy (the swap frees a 512 MiB key) and an `import --merge`
# of the items' file into their filter (a BITOP OR of 512 MiB in the swap).
# For each step: MB/s of filter bytes, the file's size, the CLI's peak RSS (VmHWM polled every
# 2 ms, under `ulimit -v` 1 GiB so that a runaway cannot take the machine), and the longest
# command Redis ran meanwhile (SLOWLOG with every command logged); the copy is checked byte for
# byte (SHA-1 computed by Redis). cli/tests/cli_snapshot.rs keeps a 64 MiB version in the tests.
# Usage: scripts/bench_snapshot.sh [ITEMS]  (default 2000000)
# Needs redis-server, redis-cli, python3; about 1.1 GB of memory for Redis and 1.1 GB of disk.
set -euo pipefail
cd "$(dirname "$0")/.."
items=${1:-2000000}
case $items in ''|*[!0-9]*|0*) echo "usage: $0 [ITEMS] (a positive whole number)" >&2; exit 2;; esac
out=target/bench
mkdir -p "$out"
cargo build --release --quiet -p redbloom-cli --bin redbloom
redbloom=target/release/redbloom

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
port=$(free_port)
tmp=$(mktemp -d -p "$out")
cleanup() {
    redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
    --logfile "$PWD/$tmp/redis.log" --dir "$PWD/$tmp" \
    --slowlog-log-slower-than 0 --slowlog-max-len 1000000
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
redis-cli -p "$port" ping >/dev/null
url="redis://127.0.0.1:$port"
flags=(--url "$url" --bits 4294967296 --json)

# The helper: `fill KEY` (512 MiB of noise), `run LABEL KEY CMD...` (one measured step, one line
# of JSON), `same A B` (whether two keys hold the same bytes).
helper() {
    python3 - "$port" "$@" <<'EOF'
import json, os, subprocess, sys, time
sys.path.insert(0, "scripts")
from bench_counting import Redis

port, what, args = sys.argv[1], sys.argv[2], sys.argv[3:]
r = Redis(port)
if what == "fill":
    for i in range(512):
        r.call("SETRANGE", args[0], i << 20, os.urandom(1 << 20))
elif what == "same":
    sha = lambda k: r.call("EVAL", "return redis.sha1hex(redis.call('get', KEYS[1]) or '')", 1, k)
    print("identical" if sha(args[0]) == sha(args[1]) else "DIFFERENT")
elif what == "run":
    label, key, cmd = args[0], args[1], args[2:]
    filter_bytes = r.call("STRLEN", key)
    r.call("SLOWLOG", "RESET")
    started = time.monotonic()
    child = subprocess.Popen(["bash", "-c", 'ulimit -v 1048576 && exec "$0" "$@"', *cmd],
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
    peak = 0
    while child.poll() is None:
        try:
            for line in open(f"/proc/{child.pid}/status"):
                if line.startswith("VmHWM:"):
                    peak = max(peak, int(line.split()[1]))
        except (FileNotFoundError, ProcessLookupError):
            pass
        time.sleep(0.002)
    seconds = time.monotonic() - started
    stdout, stderr = child.communicate()
    if child.returncode != 0:
        sys.exit(f"{label}: exit {child.returncode}: {stderr.decode().strip()}")
    report = json.loads(stdout)
    filter_bytes = max(filter_bytes, r.call("STRLEN", key))
    log = [e for e in r.call("SLOWLOG", "GET", 1000000) if e[3][0].upper() != b"SLOWLOG"]
    slowest = max(log, key=lambda e: e[2])
    print(json.dumps({
        "label": label,
        "filter_mib": round(filter_bytes / 2**20, 1),
        "file_mb": round(report["bytes"] / 1e6, 1),
        "seconds": round(seconds, 2),
        "mb_per_s": round(filter_bytes / 1e6 / seconds, 1),
        "peak_rss_mib": round(peak / 1024, 1),
        "slowest_command_ms": round(slowest[2] / 1000, 2),
        "slowest_command": " ".join(a.decode(errors="replace")[:24] for a in slowest[3][:3]),
        "commands": len(log),
    }))
EOF
}

echo "--- Redis $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/'), $(nproc) cores, loopback;" \
    "a 512 MiB filter (--bits 4294967296), release build"

# 1. Noise.
helper fill noise
helper run export_noise noise "$redbloom" "${flags[@]}" --key noise export "$tmp/noise.rbloom"
helper run import_noise noise-copy "$redbloom" "${flags[@]}" --key noise-copy import "$tmp/noise.rbloom"
echo "noise copy: $(helper same noise noise-copy)"
# Again, over the copy: the swap now replaces (and frees) a 512 MiB key.
helper run reimport_noise noise-copy "$redbloom" "${flags[@]}" --key noise-copy import "$tmp/noise.rbloom"
echo "noise copy: $(helper same noise noise-copy)"
redis-cli -p "$port" flushall >/dev/null
rm -f "$tmp/noise.rbloom"

# 2. Items.
seq 0 $((items - 1)) | sed 's/^/item:/' > "$tmp/items.txt"
"$redbloom" "${flags[@]}" --key items load "$tmp/items.txt" | sed 's/^/load: /'
# A go-zero filter's string ends at its highest byte set: pad it to the full 512 MiB, as a
# filter that has taken bits near its end holds it.
redis-cli -p "$port" setrange items $((512 * 1048576 - 1)) "$(printf '\001')" >/dev/null
helper run export_items items "$redbloom" "${flags[@]}" --key items export "$tmp/items.rbloom"
helper run import_items items-copy "$redbloom" "${flags[@]}" --key items-copy import "$tmp/items.rbloom"
echo "items copy: $(helper same items items-copy)"
# --merge into the filter itself: one BITOP OR of 512 MiB in the swap.
helper run merge_items items "$redbloom" "${flags[@]}" --key items import --merge "$tmp/items.rbloom"
echo "items after merging itself: $(helper same items items-copy)"
