#!/usr/bin/env bash
# A file loaded twice (a crawler's seed list, a blacklist pushed again): for each filter, ITEMS
# items loaded (`load`), then the same file loaded again, with BASE and NEW alternating, ROUNDS
# times, against one private redis-server with an AOF (`appendonly yes`, no automatic rewrite;
# FLUSHALL before each pair). Prints the median seconds of each load, the server's CPU seconds
# for it (INFO cpu) and the bytes it appended to the AOF (what replicas receive too). The CLI's defaults (exact answers on), plus
# FLAGS for both builds (FLAGS=--inexact-retries: the unrecorded paths).
# ONLY=regex keeps the filters whose names match.
# Usage: [FLAGS=...] [ONLY=...] scripts/reload_aof.sh BASE_BIN NEW_BIN [ROUNDS] [ITEMS]
set -euo pipefail
base=$1 new=$2 rounds=${3:-3} items=${4:-200000}
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
dir=$(mktemp -d)
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly yes \
    --auto-aof-rewrite-percentage 0 --dir "$dir" --daemonize yes --logfile /dev/null
trap 'redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
cli() { redis-cli -p "$port" "$@"; }
aof() { cli info persistence | grep aof_current_size | cut -d: -f2 | tr -d '\r'; }
cpu() { cli info cpu | grep -E "used_cpu_(user|sys):" | cut -d: -f2 | tr -d '\r' | paste -sd+ | bc; }
seq 1 "$items" | sed 's/^/url:/' > "$dir/items"
results=$(mktemp)
filters=(
    "go-zero 1.2 MB|--capacity 1000000 --fpr 0.01"
    "native 1.2 MB|--layout native --capacity 1000000 --fpr 0.01"
    "go-zero 12 MB (ranges)|--capacity 10000000 --fpr 0.01"
    "window 1.2 MB|--window 1h --capacity 1000000 --fpr 0.01"
    "window 18 MB (ranges)|--window 1h --capacity 10000000 --fpr 0.001"
)
for _ in $(seq "$rounds"); do
    for entry in "${filters[@]}"; do
        name=${entry%%|*}
        [[ -z ${ONLY:-} || $name =~ $ONLY ]] || continue
        read -r -a flags <<< "${entry#*|} ${FLAGS:-}"
        for build in base new; do
            bin=$base
            [ "$build" = new ] && bin=$new
            cli flushall > /dev/null
            for pass in first again; do
                before=$(aof) busy=$(cpu)
                out=$("$bin" --url "redis://127.0.0.1:$port" --key f --json "${flags[@]}" load "$dir/items")
                after=$(aof) used=$(echo "$(cpu) - $busy" | bc)
                secs=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["seconds"])' "$out")
                printf '%s|%s|%s\t%s\t%s\t%s\n' "$name" "$build" "$pass" "$secs" "$used" "$((after - before))" >> "$results"
            done
        done
    done
done
python3 - "$results" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    label, secs, cpu, aof = line.rstrip("\n").split("\t")
    rows.setdefault(label, []).append((float(secs), float(cpu), int(aof)))
names = []
for label in rows:
    name = label.split("|")[0]
    if name not in names:
        names.append(name)
def med(name, build, p):
    runs = rows[f"{name}|{build}|{p}"]
    return tuple(statistics.median(r[i] for r in runs) for i in range(3))
print("| filter | base first: s, CPU s, AOF MB | new first | base again | new again | new / base, first: CPU | again: s, CPU |")
print("|---|---|---|---|---|---|---|")
for name in names:
    cells = [med(name, b, p) for p in ("first", "again") for b in ("base", "new")]
    bf, nf, ba, na = cells
    fmt = lambda c: f"{c[0]:.2f}, {c[1]:.2f}, {c[2] / 1e6:.1f}"
    print(f"| {name} | {fmt(bf)} | {fmt(nf)} | {fmt(ba)} | {fmt(na)} | {nf[1] / bf[1]:.2f}x | {na[0] / ba[0]:.2f}x, {na[1] / ba[1]:.2f}x |")
PY
rm -f "$results"
