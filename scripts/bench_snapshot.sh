#!/usr/bin/env bash
# Snapshots of a 512 MiB filter (SPEC.md §5, docs/snapshot-format.md), in one run on one machine:
# `redbloom export FILE`, then `import FILE` into another key of the same private redis-server,
# of a go-zero filter of 2^32 bits (one key of 512 MiB, the largest) holding
#  1. noise: 512 MiB of random bytes, set by SETRANGE (a filter near its best fill looks so):
#     every chunk stored raw, the largest file and the most work per byte;
#  2. ITEMS items loaded by `redbloom load` (default 2,000,000: 28 M of its 4.3 G bits set):
#     sparse chunks, stored LZ4.
# Then a second import over the first copy (the swap frees a 512 MiB key), `import --merge` of
# each file into its filter (by ranges of --merge-chunk, lua/import_merge.lua), and the same
# 2^32 bits over SHARDS shards (default 8: keys of 64 MiB), whose import makes staging strings
# SHARDS times smaller. And, Redis alone, the ways to make a 512 MiB staging string: one SETRANGE
# of its last byte (what import does), 512 SETRANGEs of 1 MiB in order, 512 APPENDs of 1 MiB.
# For each step: MB/s of filter bytes, the file's size, the CLI's peak RSS (VmHWM polled every
# 2 ms, under `ulimit -v` 1 GiB so that a runaway cannot take the machine), and the commands
# Redis ran meanwhile (SLOWLOG with every command logged, those scripts run included): the
# longest, the 99th percentile, how many took 1 ms or more; each copy is checked byte for byte
# (SHA-1 computed by Redis). cli/tests/cli_snapshot.rs keeps a 64 MiB version in the tests.
# Usage: scripts/bench_snapshot.sh [ITEMS] [SHARDS]  (defaults 2000000 and 8)
#   REDBLOOM=PATH      a binary built elsewhere (another commit, to compare) instead of this one's
#   MERGE_CHUNKS=".."  the --merge-chunk values the merges run with (default "128K", the default)
# Needs redis-server, redis-cli, python3; about 1.7 GB of memory for Redis and 1.1 GB of disk.
set -euo pipefail
cd "$(dirname "$0")/.."
items=${1:-2000000}
shards=${2:-8}
for n in "$items" "$shards"; do
    case $n in ''|*[!0-9]*|0*) echo "usage: $0 [ITEMS] [SHARDS] (positive whole numbers)" >&2; exit 2;; esac
done
chunks=${MERGE_CHUNKS:-128K}
out=target/bench
mkdir -p "$out"
if [ -n "${REDBLOOM:-}" ]; then
    redbloom=$REDBLOOM
else
    cargo build --release --quiet -p redbloom-cli --bin redbloom
    redbloom=target/release/redbloom
fi

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

# The helper: `fill KEY` (512 MiB of noise), `pad KEY` (the filter's keys to their full size),
# `run LABEL KEY CMD...` (one measured step, one line of JSON), `same A B` (whether two filters
# hold the same bytes, shard by shard), `staging` (the ways to make a 512 MiB string). KEY: a
# filter's key; with `/N` after it (`items/8`), the N shards' keys.
helper() {
    python3 - "$port" "$@" <<'EOF'
import json, os, subprocess, sys, time
sys.path.insert(0, "scripts")
from bench_counting import Redis

port, what, args = sys.argv[1], sys.argv[2], sys.argv[3:]
r = Redis(port)

def keys_of(spec):
    """The keys of the filter `KEY`, or of `KEY/N`: its N shards' keys, by shard."""
    if "/" not in spec:
        return [spec]
    key, n = spec.rsplit("/", 1)
    found = [k.decode() for k in r.call("KEYS", "{rb*}:%s:shard:*/%s" % (key, n))]
    return sorted(found, key=lambda k: int(k.rsplit(":shard:", 1)[1].split("/")[0]))

def log():
    return [e for e in r.call("SLOWLOG", "GET", -1) if e[3][0].upper() != b"SLOWLOG"]

def by_command(entries):
    groups = {}
    for e in entries:
        name = e[3][0].decode(errors="replace").upper()
        if name in ("EVALSHA", "EVAL") and len(e[3]) > 2:
            name += "/" + e[3][2].decode(errors="replace")
        groups.setdefault(name, []).append(e[2])
    out = {}
    for name, micros in sorted(groups.items(), key=lambda g: -max(g[1])):
        micros.sort()
        out[name] = [len(micros), round(micros[len(micros) // 2] / 1000, 3),
                     round(micros[len(micros) * 99 // 100] / 1000, 3), round(micros[-1] / 1000, 2)]
    return out

def strlen(spec):
    return sum(r.call("STRLEN", k) for k in keys_of(spec))

if what == "fill":
    for i in range(512):
        r.call("SETRANGE", args[0], i << 20, os.urandom(1 << 20))
elif what == "pad":
    # A go-zero filter's string ends at its highest byte set: pad it to its full size, as a
    # filter that has taken bits near its end holds it.
    keys = keys_of(args[0])
    for k in keys:
        r.call("SETRANGE", k, (512 << 20) // len(keys) - 1, b"\x01")
elif what == "same":
    sha = lambda k: r.call("EVAL", "return redis.sha1hex(redis.call('get', KEYS[1]) or '')", 1, k)
    a, b = keys_of(args[0]), keys_of(args[1])
    same = len(a) == len(b) and [sha(k) for k in a] == [sha(k) for k in b]
    print("identical" if same else "DIFFERENT")
elif what == "staging":
    # A 512 MiB string made three ways: the longest command of each, and the memory it took.
    mib = 1 << 20
    piece = os.urandom(mib)
    ways = {
        "one SETRANGE of its last byte": lambda: r.call("SETRANGE", "s", 512 * mib - 1, b"\0"),
        "512 SETRANGEs of 1 MiB in order":
            lambda: [r.call("SETRANGE", "s", i * mib, piece) for i in range(512)],
        "512 APPENDs of 1 MiB": lambda: [r.call("APPEND", "s", piece) for _ in range(512)],
    }
    for name, make in ways.items():
        r.call("DEL", "s")
        before = r.call("INFO", "memory").decode()
        used = lambda info: int(info.split("used_memory:")[1].split()[0])
        r.call("SLOWLOG", "RESET")
        started = time.monotonic()
        make()
        seconds = time.monotonic() - started
        micros = sorted(e[2] for e in log())
        after = r.call("INFO", "memory").decode()
        print(json.dumps({
            "label": "staging: " + name,
            "seconds": round(seconds, 2),
            "slowest_command_ms": round(micros[-1] / 1000, 2),
            "commands_over_1ms": sum(m >= 1000 for m in micros),
            "memory_mib": round((used(after) - used(before)) / mib, 1),
        }))
    r.call("DEL", "s")
elif what == "run":
    label, spec, cmd = args[0], args[1], args[2:]
    filter_bytes = strlen(spec)
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
    filter_bytes = max(filter_bytes, strlen(spec))
    entries = log()
    slowest = max(entries, key=lambda e: e[2])
    micros = sorted(e[2] for e in entries)
    print(json.dumps({
        "label": label,
        "filter_mib": round(filter_bytes / 2**20, 1),
        "file_mb": round(report["bytes"] / 1e6, 1),
        "seconds": round(seconds, 2),
        "mb_per_s": round(filter_bytes / 1e6 / seconds, 1),
        "peak_rss_mib": round(peak / 1024, 1),
        "slowest_command_ms": round(slowest[2] / 1000, 2),
        "slowest_command": " ".join(a.decode(errors="replace")[:24] for a in slowest[3][:3]),
        "p99_command_ms": round(micros[len(micros) * 99 // 100] / 1000, 3),
        "commands_over_1ms": sum(m >= 1000 for m in micros),
        "commands": len(entries),
        # Per command (a script by its number of keys: EVALSHA/3 is a merge's step, EVALSHA/2
        # the parameters' check): calls, median, 99th percentile and longest, in ms. A command
        # that costs microseconds by nature and shows tens of ms is the machine pausing Redis.
        "by_command": by_command(entries),
    }))
EOF
}

echo "--- Redis $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/'), $(nproc) cores, loopback;" \
    "a 512 MiB filter (--bits 4294967296), release build; merges by --merge-chunk $chunks"

# 1. Noise.
helper fill noise
helper run export_noise noise "$redbloom" "${flags[@]}" --key noise export "$tmp/noise.rbloom"
helper run import_noise noise-copy "$redbloom" "${flags[@]}" --key noise-copy import "$tmp/noise.rbloom"
echo "noise copy: $(helper same noise noise-copy)"
# Again, over the copy: the swap now replaces (and frees) a 512 MiB key.
helper run reimport_noise noise-copy "$redbloom" "${flags[@]}" --key noise-copy import "$tmp/noise.rbloom"
echo "noise copy: $(helper same noise noise-copy)"
# --merge of the file into the filter itself: every range staged and ORed.
for chunk in $chunks; do
    helper run "merge_noise_$chunk" noise "$redbloom" "${flags[@]}" --merge-chunk "$chunk" \
        --key noise import --merge "$tmp/noise.rbloom"
    echo "noise after merging itself: $(helper same noise noise-copy)"
done
redis-cli -p "$port" flushall >/dev/null
rm -f "$tmp/noise.rbloom"

# 2. Making the staging string, Redis alone.
helper staging

# 3. Items.
seq 0 $((items - 1)) | sed 's/^/item:/' > "$tmp/items.txt"
"$redbloom" "${flags[@]}" --key items load "$tmp/items.txt" | sed 's/^/load: /'
helper pad items
helper run export_items items "$redbloom" "${flags[@]}" --key items export "$tmp/items.rbloom"
helper run import_items items-copy "$redbloom" "${flags[@]}" --key items-copy import "$tmp/items.rbloom"
echo "items copy: $(helper same items items-copy)"
for chunk in $chunks; do
    helper run "merge_items_$chunk" items "$redbloom" "${flags[@]}" --merge-chunk "$chunk" \
        --key items import --merge "$tmp/items.rbloom"
    echo "items after merging itself: $(helper same items items-copy)"
done
redis-cli -p "$port" flushall >/dev/null
rm -f "$tmp/items.rbloom"

# 4. The same bits over SHARDS shards: each key, and each staging string, SHARDS times smaller.
sharded=("${flags[@]}" --shards "$shards")
"$redbloom" "${sharded[@]}" --key items load "$tmp/items.txt" | sed 's/^/load: /'
helper pad "items/$shards"
helper run "export_items_${shards}_shards" "items/$shards" "$redbloom" "${sharded[@]}" \
    --key items export "$tmp/items.rbloom"
helper run "import_items_${shards}_shards" "items-copy/$shards" "$redbloom" "${sharded[@]}" \
    --key items-copy import "$tmp/items.rbloom"
echo "sharded items copy: $(helper same "items/$shards" "items-copy/$shards")"
for chunk in $chunks; do
    helper run "merge_items_${shards}_shards_$chunk" "items/$shards" "$redbloom" "${sharded[@]}" \
        --merge-chunk "$chunk" --key items import --merge "$tmp/items.rbloom"
    echo "sharded items after merging itself: $(helper same "items/$shards" "items-copy/$shards")"
done
