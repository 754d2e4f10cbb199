"""Helper of scripts/bench_growing.sh: memory of a filter's keys (the raw-socket client of
bench_counting.py), one command, and the summary tables. Each command prints one line of JSON.

  bench_growing.py memory PORT PATTERN                   MEMORY USAGE ... SAMPLES 0 of every
                                                         key matching PATTERN, summed
  bench_growing.py cmd PORT ARG...                       one command; its reply as JSON
  bench_growing.py summary RESULTS                       the tables, from the JSONL results
"""
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_counting import Redis, RedisError, jsonable  # noqa: E402


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

    bulk = by["plain_load"][0]["items"]
    print(f"\nAt 64x the first level's capacity ({bulk:,} items; plain sized for all of them; medians of the rounds):\n")
    print("| workload | per round (growing / plain) | plain items/s | growing items/s | ratio | target |")
    print("|---|---|---|---|---|---|")
    for label, what, target in [
        ("exists", "exists, 1 item per call, 64 tasks", 0.3),
        ("check", f"check {bulk:,} (bulk)", 0.3),
        ("load", f"load {bulk:,} (bulk)", None),
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

    n = by["ours_load"][0]["items"] if "ours_load" in by else 0
    print(f"\nAgainst RedisBloom, first level 1,000, growth 2, the same {n:,} items:\n")
    print("| filter | load items/s | check items/s | false-positive rate (1M absent) | memory (MEMORY USAGE, every key) | levels |")
    print("|---|---|---|---|---|---|")
    for kind, name in [("ours", "redbloom --growth 2"), ("rb", "RedisBloom BF.RESERVE k 0.01 1000 (EXPANSION 2)")]:
        if kind + "_load" not in by:
            print(f"| {name} | (not run) | | | | |")
            continue
        load, check = by[kind + "_load"][0], by[kind + "_check"][0]
        absent = by[kind + "_absent"][0]
        mem = by[kind + "_memory"][0]
        levels = by[kind + "_levels"][0]["levels"]
        hits = absent["present"] if "present" in absent else absent["true"]
        print(f"| {name} | {rate(load):,.0f} | {rate(check):,.0f} | "
              f"{hits / absent['items']:.4%} | {mem['bytes']:,} | {levels} |")
    if "rb_memory" in by and "ours_memory" in by:
        print(f"\nredbloom / RedisBloom: memory {by['ours_memory'][0]['bytes'] / by['rb_memory'][0]['bytes']:.2f}x, "
              f"load {rate(by['ours_load'][0]) / rate(by['rb_load'][0]):.2f}x, "
              f"check {rate(by['ours_check'][0]) / rate(by['rb_check'][0]):.2f}x")


def main():
    what, args = sys.argv[1], sys.argv[2:]
    if what == "memory":
        memory(*args)
    elif what == "cmd":
        print(json.dumps(jsonable(Redis(args[0]).call(*args[1:]))))
    elif what == "summary":
        summary(*args)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
