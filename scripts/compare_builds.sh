#!/usr/bin/env bash
# Is a build "no slower" than another? Two `redbloom` binaries (say the previous commit's and this
# one's) timed on the workloads that scripts/bench.sh, bench_window.sh, bench_counting.sh,
# bench_growing.sh and bench_bulk.sh run through the `redbloom` binary, with the same flags,
# alternately (base, new, base, new, ...: ROUNDS runs of each) against ONE private redis-server
# on loopback, FLUSHALL before every run so that each starts from the same (empty) server.
#
# A "scenario" is what one run does, in order, from the flushed server; each timed step is a
# workload (scenario/step), its figure the items/s of the binary's --json report (`bench`:
# items_per_sec; load, check, unload: items / seconds). Untimed steps (clear, a preload) run with
# the same binary as the run.
#   gozero_single   bench.sh (b): --bits 20*SINGLE (go-zero layout): bench --op add, then
#                   --op exists, SINGLE items, 64 tasks
#   gozero_x1       bench.sh (c): --capacity BULK --fpr 0.01: load BULK items (dense path), check
#                   them, check BULK absent items
#   gozero_x10      bench.sh (c): the same on --capacity 10*BULK (13.8 MB for 1M: by ranges)
#   native          bench.sh (d), and the plain filter of bench_window/counting/growing.sh:
#                   --layout native --capacity BULK --fpr 0.01: bench add, bench exists (SINGLE,
#                   64 tasks), clear, load, check, check absent
#   window          bench_window.sh: --window 1h --capacity BULK --fpr 0.01: the same steps
#   counting        bench_counting.sh: --counting --capacity BULK --fpr 0.01: bench add, exists,
#                   remove (adds once more untimed, then removes), clear, load, check, check
#                   absent, unload
#   growing_64x     bench_growing.sh part 1: --growth 2 --capacity BULK/64 --fpr 0.01: load BULK
#                   items (bench:N), check, check absent, bench exists (SINGLE, 64 tasks)
#   growing_1000    bench_growing.sh part 2 ("ours"): --growth 2 --capacity 1000: load, check,
#                   check absent
#   bulk_gozero     bench_bulk.sh part 1: --capacity BULK_ITEMS --fpr 0.0001 (23 MiB for 10M):
#                   load_empty (BULK_ITEMS items), load_full (the same load once the filter holds
#                   BULK_ITEMS other items, loaded untimed), load_bitfield (BULK items, --batch 1000)
#   bulk_native     bench_bulk.sh part 2: --layout native --fpr 0.01, BULK items: load and check
#                   at --capacity 10*BULK and 100*BULK; load_many: BULK_ITEMS items at 100*BULK
#   bulk_knob       bench_bulk.sh part 3: bulk_gozero's load_empty with --merge-chunk 64K, 256K,
#                   1M, 4M (128K, the default, is load_empty)
#   bulk_big        bench_bulk.sh part 4: --bits 4294967296 (512 MiB): load BULK_ITEMS items,
#                   check BULK items by ranges and with --batch 1000 (BITFIELD_RO)
# Not covered: whatever the binary cannot express: the peers benches (benches/peers.rs: go-zero's
# per-item EVALSHA pattern, RedisBloom's BF.MADD/BF.MEXISTS and cuckoo filters), which measure
# other software and are no part of either build; the memory, false-positive-rate and
# server-side figures of those scripts (MEMORY USAGE, SLOWLOG, commandstats, peak RSS) -- the
# table's "same" column does flag any change of the reported counts (present, absent, removed:
# false positives included; `new` varies by an item or so between runs of one binary, and is
# shown apart); and the scripts outside the list above
# (bench_near_cache.sh, bench_snapshot.sh, bench_cluster.sh, server_cost.sh).
#
# Order: round by round; in each round every scenario runs as a pair, base then new, so that
# each workload's ROUNDS pairs are spread over the whole run (a slow minute of the machine hits
# one pair of a few workloads, not every run of one). Disturbances: every run measures the CPU
# that processes other than this script's (redis-server, redbloom, the helpers) used while it
# ran; a pair with a run where they used over COMPARE_MAX_FOREIGN cores (a cargo build next door
# takes one or two of the two) is discarded (kept in target/bench/compare-discarded.jsonl) and
# run again once the machine has been quiet for a second, at most COMPARE_RETRIES times; the
# last try is then kept, counted in the table's `dist` column. Before every pair the script waits
# (at most COMPARE_QUIET_WAIT s) for such a quiet second. All that waiting and redoing stops
# once it has taken COMPARE_PATIENCE seconds in all. Which runs are kept depends on the other
# processes' CPU only, never on the figures.
#
# Usage: scripts/compare_builds.sh BASE_BIN NEW_BIN [ROUNDS]      (ROUNDS: default 5)
#   e.g. git worktree add ../base HEAD~1 && (cd ../base && cargo build --release -p redbloom-cli
#        --bin redbloom) && cargo build --release -p redbloom-cli --bin redbloom &&
#        scripts/compare_builds.sh ../base/target/release/redbloom target/release/redbloom
# Sizes and selection, by environment (defaults: the scripts' own):
#   COMPARE_SINGLE=200000  COMPARE_BULK=1000000  COMPARE_BULK_ITEMS=10000000
#   COMPARE_ONLY=REGEX     only the scenarios whose name matches (grep -E), e.g. '^(native|window)$'
#   COMPARE_SKIP=REGEX     leave out the scenarios whose name matches, e.g. bulk_big
#   COMPARE_MAX_FOREIGN=0.10  COMPARE_RETRIES=3  COMPARE_QUIET_WAIT=120  COMPARE_PATIENCE=900
#                          (see above; PATIENCE: the most seconds, over the whole run, spent
#                          waiting for quiet seconds and running disturbed pairs again: beyond
#                          it, pairs are kept as they come, so a busy machine cannot stretch a
#                          run without bound)
# Output: a line per run, then the table (also in target/bench/compare.md); the raw results as
# JSON lines in target/bench/compare.jsonl ({"workload","build","round","items_per_sec",
# "result": the binary's report, "step_foreign_cores" (others' CPU during this command alone),
# "foreign_cores" (during the whole run), "attempt", "disturbed"}), the run's parameters
# in target/bench/compare-meta.json, stderr of any command that printed some in
# target/bench/compare-logs/.
# With the defaults 5 rounds take about 13 minutes on 2 idle cores; at most PATIENCE (15 min)
# more while other processes keep the machine busy.
# Exits non-zero only on errors (bad arguments, a command that fails or reports something
# unexpected, a server that does not start), never because of a ratio.
# Needs redis-server, redis-cli and python3.
set -euo pipefail
usage() { echo "usage: $0 BASE_BIN NEW_BIN [ROUNDS]   (ROUNDS a positive whole number, default 5)" >&2; exit 2; }
[ $# -ge 2 ] && [ $# -le 3 ] || usage
rounds=${3:-5}
single=${COMPARE_SINGLE:-200000}
bulk=${COMPARE_BULK:-1000000}
bulk_items=${COMPARE_BULK_ITEMS:-10000000}
only=${COMPARE_ONLY:-}
skip=${COMPARE_SKIP:-}
for n in "$rounds" "$single" "$bulk" "$bulk_items"; do
    case $n in ''|*[!0-9]*|0*) usage;; esac
done
max_foreign=${COMPARE_MAX_FOREIGN:-0.10}
retries=${COMPARE_RETRIES:-3}
quiet_wait=${COMPARE_QUIET_WAIT:-120}
patience=${COMPARE_PATIENCE:-900}
case $patience in ''|*[!0-9]*) echo "COMPARE_PATIENCE: a whole number of seconds, 0 or more" >&2; exit 2;; esac
case $retries in ''|*[!0-9]*) echo "COMPARE_RETRIES: a whole number, 0 or more" >&2; exit 2;; esac
case $quiet_wait in ''|*[!0-9]*) echo "COMPARE_QUIET_WAIT: a whole number of seconds, 0 or more" >&2; exit 2;; esac
python3 -c 'import sys; float(sys.argv[1]) >= 0 or sys.exit(1)' "$max_foreign" 2>/dev/null \
    || { echo "COMPARE_MAX_FOREIGN: a number of cores, 0 or more" >&2; exit 2; }
[ "$bulk" -ge 64 ] || { echo "COMPARE_BULK must be at least 64 (growing_64x's first level is BULK/64)" >&2; exit 2; }
for cmd in redis-server redis-cli python3; do
    command -v "$cmd" >/dev/null || { echo "$0: $cmd not found on PATH" >&2; exit 1; }
done
declare -A bins
for side in base new; do
    if [ "$side" = base ]; then given=$1; else given=$2; fi
    [ -f "$given" ] && [ -x "$given" ] || { echo "$0: $side binary $given is not an executable file" >&2; exit 1; }
    bins[$side]=$(cd "$(dirname "$given")" && pwd)/$(basename "$given")
done
[ "$rounds" -ge 5 ] || echo "note: $rounds round(s); a verdict needs at least 5" >&2

cd "$(dirname "$0")/.."
helper=scripts/compare_builds.py
out=target/bench
mkdir -p "$out"
results="$out/compare.jsonl"
: > "$results"
logs="$out/compare-logs"
rm -rf "$logs"; mkdir -p "$logs"

# The scenarios, in the order they run (bulk_big last: it leaves the most to free).
all=(gozero_single gozero_x1 gozero_x10 native window counting growing_64x growing_1000
     bulk_gozero bulk_native bulk_knob bulk_big)
scenarios=()
for s in "${all[@]}"; do
    if [ -n "$only" ] && ! grep -Eq -- "$only" <<<"$s"; then continue; fi
    if [ -n "$skip" ] && grep -Eq -- "$skip" <<<"$s"; then continue; fi
    scenarios+=("$s")
done
[ ${#scenarios[@]} -gt 0 ] || { echo "$0: no scenario left (COMPARE_ONLY='$only', COMPARE_SKIP='$skip'); they are: ${all[*]}" >&2; exit 2; }

# One private redis-server on loopback, shut down on exit whatever happens.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
port=$(free_port)
server_dir="$PWD/$out/compare-redis"
mkdir -p "$server_dir"
pidfile="$server_dir/redis.pid"
rm -f "$pidfile"
cleanup() {
    redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
    # Still there (not answering)? Stop it by the pid it wrote: the one server this script started.
    if [ -f "$pidfile" ]; then
        pid=$(cat "$pidfile" 2>/dev/null || true)
        for _ in $(seq 50); do [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then kill "$pid" 2>/dev/null || true; fi
    fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
    --pidfile "$pidfile" --logfile "$server_dir/redis.log" --dir "$server_dir"
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
redis-cli -p "$port" ping >/dev/null 2>&1 || { echo "$0: redis-server did not start (see $server_dir/redis.log)" >&2; exit 1; }
url="redis://127.0.0.1:$port"
flush() { redis-cli -p "$port" flushall >/dev/null; }

# The item files, kept between runs when they already have the right length.
lines() { # FILE PREFIX COUNT
    [ "$(wc -l < "$1" 2>/dev/null || echo 0)" -eq "$3" ] && [ "$(head -c ${#2} "$1")" = "$2" ] && return
    seq 0 $(($3 - 1)) | sed "s/^/$2/" > "$1.tmp" && mv "$1.tmp" "$1"
}
items="$out/compare-items.txt"      # item:0 .. BULK-1       (bench.sh, window, counting)
absent="$out/compare-absent.txt"    # absent:0 .. BULK-1     (never added)
benchf="$out/compare-bench.txt"     # bench:0 .. BULK-1      (bench_growing.sh's items)
bitems="$out/compare-bulk-items.txt"   # item:0 .. BULK_ITEMS-1  (bench_bulk.sh)
bothers="$out/compare-bulk-others.txt" # other:0 .. BULK_ITEMS-1
echo "--- preparing item files"
lines "$items" item: "$bulk"
lines "$absent" absent: "$bulk"
[[ " ${scenarios[*]} " == *" growing_64x "* ]] && lines "$benchf" bench: "$bulk"
if [[ " ${scenarios[*]} " == *" bulk_"* ]]; then lines "$bitems" item: "$bulk_items"; fi
[[ " ${scenarios[*]} " == *" bulk_gozero "* ]] && lines "$bothers" other: "$bulk_items"

# The state of one run: the binary, which build, the round, the filter's flags, what it printed.
bin="" build="" round=0 scenario="" args=() report=""
# step NAME EXPECTED_ITEMS COMMAND...: one timed command; its report recorded as SCENARIO/NAME.
step() {
    local name=$1 expect=$2; shift 2
    local log="$logs/$scenario.$name.$build.$round.err" line rate rc=0 t0 b0 r0 o0 used
    ticks; t0=$EPOCHREALTIME; b0=$busy r0=$redis_ticks o0=$own_ticks
    line=$("$bin" "${args[@]}" "$@" 2>"$log") || rc=$?
    used=$(foreign "$b0" "$r0" "$o0" "$t0")
    if [ "$rc" -ne 0 ]; then
        echo "$0: $scenario/$name ($build, round $round) exited $rc: $bin ${args[*]} $*" >&2
        echo "stdout: $line" >&2; sed 's/^/stderr: /' "$log" >&2
        exit 1
    fi
    [ -s "$log" ] || rm -f "$log"
    rate=$(python3 "$helper" record "$runfile" "$scenario/$name" "$build" "$round" "$expect" "$line" \
        step_foreign_cores="$used") || {
        echo "$0: the command was: $bin ${args[*]} $*" >&2; exit 1; }
    report+=" $name=$rate"
}
# untimed COMMAND...: a step that is no workload (clear, a preload); it must succeed.
untimed() {
    local log="$logs/$scenario.untimed.$build.$round.err" line rc=0
    line=$("$bin" "${args[@]}" "$@" 2>"$log") || rc=$?
    if [ "$rc" -ne 0 ]; then
        echo "$0: untimed step of $scenario ($build, round $round) exited $rc: $bin ${args[*]} $*" >&2
        echo "stdout: $line" >&2; sed 's/^/stderr: /' "$log" >&2
        exit 1
    fi
    [ -s "$log" ] || rm -f "$log"
}

run_gozero_single() {
    args=(--url "$url" --key rb --bits $((20 * single)) --json)
    step add "$single" bench --op add --items "$single" --concurrency 64
    step exists "$single" bench --op exists --items "$single" --concurrency 64
}
gozero_scaled() { # SCALE
    args=(--url "$url" --key bulk --capacity $(($1 * bulk)) --fpr 0.01 --json)
    step load "$bulk" load "$items"
    step check "$bulk" check "$items"
    step absent "$bulk" check "$absent"
}
run_gozero_x1() { gozero_scaled 1; }
run_gozero_x10() { gozero_scaled 10; }
# The steps of bench_window.sh / bench_counting.sh for one kind (FLAGS...).
kind_steps() {
    args=(--url "$url" "$@" --capacity "$bulk" --fpr 0.01 --json)
    step add "$single" bench --op add --items "$single" --concurrency 64
    step exists "$single" bench --op exists --items "$single" --concurrency 64
    if [ "$scenario" = counting ]; then
        step remove "$single" bench --op remove --items "$single" --concurrency 64
    fi
    untimed clear
    step load "$bulk" load "$items"
    step check "$bulk" check "$items"
    step absent "$bulk" check "$absent"
    if [ "$scenario" = counting ]; then
        step unload "$bulk" unload "$items"
    fi
}
run_native() { kind_steps --key plain --layout native; }
run_window() { kind_steps --key win --window 1h; }
run_counting() { kind_steps --key cnt --counting; }
run_growing_64x() {
    args=(--url "$url" --key grow --growth 2 --capacity $((bulk / 64)) --fpr 0.01 --json)
    step load "$bulk" load "$benchf"
    step check "$bulk" check "$benchf"
    step absent "$bulk" check "$absent"
    step exists "$single" bench --op exists --items "$single" --concurrency 64
}
run_growing_1000() {
    args=(--url "$url" --key ours --growth 2 --capacity 1000 --fpr 0.01 --json)
    step load "$bulk" load "$items"
    step check "$bulk" check "$items"
    step absent "$bulk" check "$absent"
}
run_bulk_gozero() {
    args=(--url "$url" --key gz --capacity "$bulk_items" --fpr 0.0001 --json)
    step load_empty "$bulk_items" load "$bitems"
    flush
    untimed load "$bothers"
    step load_full "$bulk_items" load "$bitems"
    flush
    step load_bitfield "$bulk" load "$items" --batch 1000
}
run_bulk_native() {
    for scale in 10 100; do
        flush
        args=(--url "$url" --key native --layout native --capacity $((scale * bulk)) --fpr 0.01 --json)
        step "load_x$scale" "$bulk" load "$items"
        step "check_x$scale" "$bulk" check "$items"
    done
    flush
    step load_many_x100 "$bulk_items" load "$bitems"
}
run_bulk_knob() {
    for chunk in 64K 256K 1M 4M; do
        flush
        args=(--url "$url" --key gz --capacity "$bulk_items" --fpr 0.0001 --merge-chunk "$chunk" --json)
        step "load_$chunk" "$bulk_items" load "$bitems"
    done
}
run_bulk_big() {
    args=(--url "$url" --key big --bits 4294967296 --json)
    step load "$bulk_items" load "$bitems"
    step check "$bulk" check "$items"
    step check_bitfield "$bulk" check "$items" --batch 1000
}

python3 - "$out/compare-meta.json" "$rounds" "$single" "$bulk" "$bulk_items" "${bins[base]}" "${bins[new]}" \
    "$(redis-server --version)" "$(nproc)" "${scenarios[*]}" <<'PY'
import hashlib, json, sys, time
path, rounds, single, bulk, bulk_items, base, new, redis, cores, scenarios = sys.argv[1:]
sha = lambda p: hashlib.sha256(open(p, "rb").read()).hexdigest()
json.dump({"started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "rounds": int(rounds),
           "single": int(single), "bulk": int(bulk), "bulk_items": int(bulk_items),
           "base": {"bin": base, "sha256": sha(base)}, "new": {"bin": new, "sha256": sha(new)},
           "redis": redis, "cores": int(cores), "scenarios": scenarios.split()},
          open(path, "w"), indent=1)
PY
echo "--- $(redis-server --version | sed 's/.*v=\([^ ]*\).*/Redis \1/'), $(nproc) cores, loopback;" \
    "$rounds round(s), single $single, bulk $bulk, bulk_items $bulk_items; $(uptime | sed 's/.*load/load/')"
echo "base: ${bins[base]} (sha256 $(sha256sum "${bins[base]}" | cut -c1-12))"
echo "new:  ${bins[new]} (sha256 $(sha256sum "${bins[new]}" | cut -c1-12))"
[ "${bins[base]}" != "${bins[new]}" ] || echo "(the same binary twice: the table shows this machine's noise)"
# Disturbances (see the header): the CPU time the machine spent outside this script's processes
# (redis-server's, and this shell's and its children's, redbloom's included) during a run, in
# cores (1.0 = one core busy all along), from /proc/stat and /proc/PID/stat.
redis_pid=$(cat "$pidfile")
hz=$(getconf CLK_TCK)
# CPU ticks: the machine's busy ones, redis-server's, this shell's and its waited-for children's.
ticks() {
    local line rest cpu u n s i w q sq st
    read -r cpu u n s i w q sq st _ < /proc/stat
    busy=$((u + n + s + q + sq + st))
    read -r line < "/proc/$redis_pid/stat"; rest=${line##*) }
    read -r -a f <<<"$rest"; redis_ticks=$((f[11] + f[12]))
    read -r line < "/proc/$$/stat"; rest=${line##*) }
    read -r -a f <<<"$rest"; own_ticks=$((f[11] + f[12] + f[13] + f[14]))
}
# foreign START_BUSY START_REDIS START_OWN START_TIME: cores used by others since then.
foreign() {
    local b0=$1 r0=$2 o0=$3 t0=$4
    ticks
    python3 -c "import sys; b,r,o,w,hz=map(float,sys.argv[1:]); print(f'{max(0.0, b - r - o) / hz / max(w, 1e-3):.3f}')" \
        $((busy - b0)) $((redis_ticks - r0)) $((own_ticks - o0)) "$(python3 -c "print($EPOCHREALTIME - $t0)")" "$hz"
}
# over STARTED_TIME: true when others used over MAX_FOREIGN cores.
over() { python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) > float(sys.argv[2]) else 1)" "$1" "$max_foreign"; }
# Patience: the wall seconds left for waiting and for pairs run again, over the whole run.
patience_left() { [ $((EPOCHSECONDS - started - kept_seconds)) -lt "$patience" ]; }
# Waits (at most QUIET_WAIT seconds, and while patience lasts) until others have used at most
# MAX_FOREIGN cores for a second.
wait_quiet() {
    local since=$EPOCHSECONDS used t0 b0 r0 o0
    while :; do
        ticks; t0=$EPOCHREALTIME; b0=$busy r0=$redis_ticks o0=$own_ticks
        sleep 1
        used=$(foreign "$b0" "$r0" "$o0" "$t0")
        over "$used" || break
        if [ $((EPOCHSECONDS - since)) -ge "$quiet_wait" ] || ! patience_left; then
            echo "    (other processes still use $used cores after $((EPOCHSECONDS - since)) s: going on)"
            break
        fi
        [ $((EPOCHSECONDS - since)) -le 1 ] && echo "    (other processes use $used cores: waiting for a quiet second)"
    done
}
runfile="$out/compare-run.jsonl"
pairfile="$out/compare-pair.jsonl"
discarded="$out/compare-discarded.jsonl"
: > "$discarded"
started=$EPOCHSECONDS
kept_seconds=0   # wall seconds of the pairs kept: what is left of the run's time is waiting and redoing
total=$((${#scenarios[@]} * rounds * 2)) done_runs=0 redone=0 kept_disturbed=0
for round in $(seq "$rounds"); do
    for scenario in "${scenarios[@]}"; do
        for attempt in $(seq $((retries + 1))); do
            wait_quiet
            : > "$pairfile"
            disturbed=false
            pair_started=$EPOCHSECONDS
            for build in base new; do
                bin=${bins[$build]}
                report=""
                : > "$runfile"
                flush
                ticks; t0=$EPOCHREALTIME; b0=$busy r0=$redis_ticks o0=$own_ticks
                "run_$scenario"
                used=$(foreign "$b0" "$r0" "$o0" "$t0")
                python3 "$helper" annotate "$runfile" "$pairfile" foreign_cores="$used" attempt="$attempt"
                if over "$used"; then disturbed=true; fi
                printf '[%3d/%d %4ds] %-14s %-4s r%d%s: others %s cores;%s\n' \
                    "$((done_runs + $([ "$build" = new ] && echo 2 || echo 1)))" "$total" \
                    $((EPOCHSECONDS - started)) "$scenario" "$build" "$round" \
                    "$([ "$attempt" -gt 1 ] && echo " (try $attempt)")" "$used" "$report"
            done
            if [ "$disturbed" = true ] && [ "$attempt" -le "$retries" ] && patience_left; then
                echo "    disturbed by other processes (over $max_foreign cores): this pair again"
                python3 "$helper" annotate "$pairfile" "$discarded" discarded=true
                redone=$((redone + 1))
                continue
            fi
            python3 "$helper" annotate "$pairfile" "$results" disturbed="$disturbed"
            kept_seconds=$((kept_seconds + EPOCHSECONDS - pair_started))
            done_runs=$((done_runs + 2))
            [ "$disturbed" = true ] && kept_disturbed=$((kept_disturbed + 1))
            break
        done
    done
done
rm -f "$runfile" "$pairfile"
flush
elapsed=$((EPOCHSECONDS - started))
echo
python3 "$helper" table "$results" | tee "$out/compare.md"
echo
echo "took ${elapsed} s ($((elapsed / 60)) min $((elapsed % 60)) s), of which $((elapsed - kept_seconds)) s" \
    "waiting for quiet seconds and running again $redone disturbed pair(s) (they are in $discarded);" \
    "$kept_disturbed pair(s) kept although disturbed; raw results: $results"
