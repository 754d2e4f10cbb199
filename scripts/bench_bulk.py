"""Helper of scripts/bench_bulk.sh: what the server did during a run (the raw-socket client of
bench_counting.py), and the summary tables. Each command prints one line of JSON.

  bench_bulk.py watch PORT          SLOWLOG RESET (every command logged, up to 1,000,000 entries),
                                    CONFIG RESETSTAT, and the server's CPU so far
  bench_bulk.py server PORT         since `watch`: the longest commands (SLOWLOG), calls and
                                    server time per command (INFO commandstats), server CPU
  bench_bulk.py summary RESULTS     the tables, from the JSONL results
"""
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_counting import Redis  # noqa: E402


def cpu(r):
    info = r.call("INFO", "cpu").decode()
    fields = dict(line.split(":", 1) for line in info.splitlines() if ":" in line)
    return float(fields["used_cpu_user"]) + float(fields["used_cpu_sys"])


def watch(port):
    r = Redis(port)
    r.call("CONFIG", "SET", "slowlog-log-slower-than", "0")
    r.call("CONFIG", "SET", "slowlog-max-len", "1000000")
    r.call("SLOWLOG", "RESET")
    r.call("CONFIG", "RESETSTAT")
    print(json.dumps({"cpu": cpu(r)}))


def server(port, cpu_before):
    r = Redis(port)
    entries = r.call("SLOWLOG", "GET", "-1")
    durations = []
    for entry in entries:
        args = [a.decode(errors="replace") if isinstance(a, bytes) else str(a) for a in entry[3]]
        name = args[0].lower() if args else "?"
        if name not in ("slowlog", "config", "info"):  # this helper's own commands
            durations.append((entry[2], name))
    durations.sort(reverse=True)
    # Inside MULTI each command is logged by itself (EXEC is not); a merge step's hold is its
    # SET and EVAL (`eval` here: the script with every command it runs).
    execs = [d for d, name in durations if name == "eval"]
    by_command = {}
    for d, name in durations:
        by_command.setdefault(name, []).append(d)
    by_command = {
        name: {"n": len(ds), "median_us": statistics.median(ds), "p99_us": ds[len(ds) // 100], "max_us": ds[0]}
        for name, ds in by_command.items()
        if name in ("eval", "set", "bitfield", "bitfield_ro", "getrange", "evalsha")
    }
    info = r.call("INFO", "commandstats").decode()
    stats = {}
    for line in info.splitlines():
        if line.startswith("cmdstat_"):
            name, rest = line[len("cmdstat_"):].split(":", 1)
            kv = dict(x.split("=") for x in rest.split(","))
            stats[name] = {"calls": int(kv["calls"]), "usec": int(kv["usec"])}
    keep = ("exec", "bitfield", "bitfield_ro", "getrange", "setrange", "eval", "evalsha", "bf.madd", "bf.mexists")
    print(json.dumps({
        "logged": len(durations),
        "longest_us": durations[0][0] if durations else 0,
        "longest_cmd": durations[0][1] if durations else None,
        "top5": [d for d, _ in durations[:5]],
        "exec_calls": len(execs),
        "exec_max_us": execs[0] if execs else 0,
        "exec_p99_us": execs[len(execs) // 100] if execs else 0,
        "exec_median_us": statistics.median(execs) if execs else 0,
        "by_command": by_command,
        "commands": {k: v for k, v in stats.items() if k in keep},
        "server_cpu_s": round(cpu(r) - float(cpu_before), 3),
    }))


def summary(path):
    rows = [json.loads(line) for line in open(path)]
    by = {}
    for row in rows:
        by.setdefault(row["label"], []).append(row["result"])

    def rate(result):
        if "items_per_sec" in result:
            return result["items_per_sec"]
        return result["items"] / result["seconds"]

    def rates(label):
        return [rate(r) for r in by.get(label, [])]

    def med(label):
        values = rates(label)
        return statistics.median(values) if values else float("nan")

    gz = rates("gozero_add")
    print(f"\ngo-zero per-item pattern (50 clients, EVALSHA per item), per round: "
          + ", ".join(f"{g:,.0f}" for g in gz) + f" items/s (median {med('gozero_add'):,.0f})\n")
    print("| workload | per round: items/s (x go-zero pattern of the round) | median | target |")
    print("|---|---|---|---|")
    for label, what, target in [
        ("load_empty", "load into an empty 23 MiB go-zero filter (by ranges)", 40),
        ("load_full", "load into the same filter holding 10M other items (by ranges)", 40),
        ("load_bitfield", "load, BITFIELD path (`--batch 1000`: the previous build's)", None),
    ]:
        per = ", ".join(f"{rate(r):,.0f} ({rate(r) / g:.1f}x)" for r, g in zip(by.get(label, []), gz))
        ratio = med(label) / med("gozero_add")
        goal = f">= {target}x: {'met' if ratio >= target else '**missed**'}" if target else "-"
        print(f"| {what} | {per} | {med(label):,.0f} ({ratio:.1f}x) | {goal} |")

    caps = sorted({int(l.split("_")[2]) for l in by if l.startswith("native_load_") and l[12:].isdigit()})
    if caps:
        print("\nnative layout (1%) next to RedisBloom (BF.MADD / BF.MEXISTS of 1,000 items, 8 tasks),"
              " 1,000,000 items, filters sized for CAPACITY items; per round: ours / RedisBloom\n")
        print("| capacity (filter bytes) | load: per round | load: median ratio | check: per round | check: median ratio |")
        print("|---|---|---|---|---|")
        for cap in caps:
            cells = []
            for op in ("load", "check"):
                ours, theirs = by.get(f"native_{op}_{cap}", []), by.get(f"rb_{op}_{cap}", [])
                per = ", ".join(f"{rate(a) / rate(b):.2f}" for a, b in zip(ours, theirs))
                ratio = med(f"native_{op}_{cap}") / med(f"rb_{op}_{cap}") if theirs else float("nan")
                cells += [per, f"{med(f'native_{op}_{cap}'):,.0f} / {med(f'rb_{op}_{cap}'):,.0f} = {ratio:.2f}x"]
            size = by.get(f"native_info_{cap}", [{}])[0].get("bits", 0) // 8
            print(f"| {cap:,} ({size:,}) | " + " | ".join(cells) + " |")

    ours, theirs = by.get("native_many_100000000", []), by.get("rb_many_100000000", [])
    if ours:
        n = ours[0]["items"]
        print(f"\nload of {n:,} items into the filters sized for 100,000,000 (per round, ours / RedisBloom): "
              + ", ".join(f"{rate(a):,.0f} / {rate(b):,.0f} = {rate(a) / rate(b):.2f}x" for a, b in zip(ours, theirs)))

    for label in ("load_empty", "load_full", "big_load"):
        rss = [r["kib"] for r in by.get(label + "_rss", [])]
        if rss:
            print(f"peak RSS of {label}: " + ", ".join(f"{k / 1024:,.0f} MiB" for k in rss))

    knobs = sorted({int(l.split("_")[2]) for l in by if l.startswith("knob_load_") and l[10:].isdigit()})
    if knobs:
        print("\nThe knob (`--merge-chunk`), load of the items into the empty 23 MiB filter:\n")
        print("| merge chunk | items/s per round | merge steps | step (EVAL) median / p99 / max (µs) | longest command (µs) |")
        print("|---|---|---|---|---|")
        for knob in knobs:
            loads = by[f"knob_load_{knob}"]
            servers = by[f"knob_load_{knob}_server"]
            s = servers[-1]
            print(f"| {knob >> 10} KiB | " + ", ".join(f"{rate(r):,.0f}" for r in loads)
                  + f" | {s['exec_calls']} | {s['exec_median_us']:,.0f} / {s['exec_p99_us']:,} / "
                  + ", ".join(f"{x['exec_max_us']:,}" for x in servers)
                  + " | " + ", ".join(f"{x['longest_us']:,} ({x['longest_cmd']})" for x in servers) + " |")

    for label in ("big_load", "big_check", "big_check_bitfield"):
        for r, s in zip(by.get(label, []), by.get(label + "_server", [])):
            print(f"\n{label}: {rate(r):,.0f} items/s ({r}); server: {json.dumps(s)}")


if __name__ == "__main__":
    command = sys.argv[1]
    if command == "watch":
        watch(sys.argv[2])
    elif command == "server":
        server(sys.argv[2], sys.argv[3])
    elif command == "summary":
        summary(sys.argv[2])
    else:
        sys.exit(__doc__)
