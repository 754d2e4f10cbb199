"""Helper of scripts/bench_growing.sh: RedisBloom's scaling filter over a raw socket (the
pipelining client of bench_counting.py), memory of a filter's keys, and the summary tables.
Each command prints one line of JSON.

  bench_growing.py bf PORT madd|mexists KEY FILE BATCH   BF.MADD / BF.MEXISTS of every line,
                                                         BATCH items per command, pipelined
  bench_growing.py memory PORT PATTERN                   MEMORY USAGE ... SAMPLES 0 of every
                                                         key matching PATTERN, summed
  bench_growing.py cmd PORT ARG...                       one command; its reply as JSON
  bench_growing.py summary RESULTS                       the tables, from the JSONL results
"""
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_counting import Redis, RedisError, jsonable  # noqa: E402


def bf(port, op, key, path, batch):
    r = Redis(port)
    name = {"madd": "BF.MADD", "mexists": "BF.MEXISTS"}[op]
    batch = int(batch)

    def commands():
        items = []
        with open(path, "rb") as f:
            for line in f:
                items.append(line.rstrip(b"\n"))
                if len(items) == batch:
                    yield Redis.encode([name, key] + items)
                    items = []
        if items:
            yield Redis.encode([name, key] + items)

    started = time.perf_counter()
    items = hits = 0
    errors = []
    for reply in r.pipeline(commands()):
        if isinstance(reply, RedisError):
            if len(errors) < 3:
                errors.append(str(reply))
            continue
        items += len(reply)
        hits += sum(1 for v in reply if v == 1)
    seconds = time.perf_counter() - started
    out = {"items": items, "seconds": seconds, "items_per_sec": items / seconds, "errors": errors}
    out["new" if op == "madd" else "present"] = hits
    print(json.dumps(out))


def memory(port, pattern):
    r = Redis(port)
    total, keys, cursor = 0, [], "0"
    while True:
        cursor, found = r.call("SCAN", cursor, "MATCH", pattern, "COUNT", 1000)
        keys.extend(k.decode() if isinstance(k, bytes) else k for k in found)
        cursor = cursor.decode() if isinstance(cursor, bytes) else cursor
        if cursor == "0":
            break
    for key in keys:
        total += r.call("MEMORY", "USAGE", key, "SAMPLES", 0) or 0
    print(json.dumps({"bytes": total, "keys": len(keys)}))


def summary(path):
    rows = [json.loads(line) for line in open(path)]
    by = {}
    for row in rows:
        by.setdefault(row["label"], []).append(row["result"])

    def rate(result):
        if "items_per_sec" in result:
            return result["items_per_sec"]
        return result["items"] / result["seconds"]

    def med(label):
        return statistics.median(rate(r) for r in by[label])

    print("\nAt 64x the first level's capacity (plain sized for every item; medians of the rounds):\n")
    print("| workload | per round (growing / plain) | plain items/s | growing items/s | ratio | target |")
    print("|---|---|---|---|---|---|")
    for label, what, target in [
        ("exists", "exists, 1 item per call, 64 tasks", 0.3),
        ("check", "check 1M (bulk)", 0.3),
        ("load", "load 1M (bulk)", None),
    ]:
        p, g = by["plain_" + label], by["growing_" + label]
        per = ", ".join(f"{rate(b) / rate(a):.2f}" for a, b in zip(p, g))
        ratio = med("growing_" + label) / med("plain_" + label)
        goal = f">= {target}x: {'met' if ratio >= target else '**missed**'}" if target else "-"
        print(f"| {what} | {per} | {med('plain_' + label):,.0f} | {med('growing_' + label):,.0f} | {ratio:.2f}x | {goal} |")
    for kind in ("plain", "growing"):
        absent = by[kind + "_absent"][0]
        print(f"\n{kind}: false positives {absent['present']:,} of {absent['items']:,} absent items "
              f"({absent['present'] / absent['items']:.4%})", end="")
    print()
    info = by["growing_info"][0]
    print(f"growing at 64x: {info['levels']} levels, {info['items']:,} items taken of "
          f"{info['capacity']:,}, {info['bytes']:,} bytes in its levels")

    print("\nAgainst RedisBloom, first level 1,000, growth 2, the same 1,000,000 items:\n")
    print("| filter | load items/s | check items/s | false-positive rate (1M absent) | memory (MEMORY USAGE, every key) | levels |")
    print("|---|---|---|---|---|---|")
    for kind, name in [("ours", "redbloom --growth 2"), ("rb", "RedisBloom BF.RESERVE k 0.01 1000 EXPANSION 2")]:
        if kind + "_load" not in by:
            print(f"| {name} | (not run) | | | | |")
            continue
        load, check = by[kind + "_load"][0], by[kind + "_check"][0]
        absent = by[kind + "_absent"][0]
        mem = by[kind + "_memory"][0]
        levels = by[kind + "_levels"][0]["levels"]
        print(f"| {name} | {rate(load):,.0f} | {rate(check):,.0f} | "
              f"{absent['present'] / absent['items']:.4%} | {mem['bytes']:,} | {levels} |")
    if "rb_memory" in by and "ours_memory" in by:
        print(f"\nmemory, redbloom / RedisBloom: {by['ours_memory'][0]['bytes'] / by['rb_memory'][0]['bytes']:.2f}x")


def main():
    what, args = sys.argv[1], sys.argv[2:]
    if what == "bf":
        bf(*args)
    elif what == "memory":
        memory(*args)
    elif what == "cmd":
        print(json.dumps(jsonable(Redis(args[0]).call(*args[1:]))))
    elif what == "summary":
        summary(*args)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
