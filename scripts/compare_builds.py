"""Helper of scripts/compare_builds.sh.

  compare_builds.py record OUT WORKLOAD BUILD ROUND EXPECT LINE
      checks LINE (the one line of JSON a `redbloom --json` command printed: an object with
      "items" == EXPECT and "seconds" > 0, not interrupted), appends one JSON line to OUT:
      {"workload", "build", "round", "items_per_sec", "result"} and prints the rate;
      exits 1 (saying why) when LINE is not such a report
  compare_builds.py table OUT
      the comparison table of every workload in OUT: medians of each build, the ratio
      new/base of the medians, the spread of the pairwise ratios (round i's new / round i's
      base), and whether the non-timing fields (items, new, present, absent, removed)
      agreed in every run of both builds
"""
import json
import math
import statistics
import sys

# Fields that vary from run to run by timing alone; every other field of a report is compared.
TIMING = {"seconds", "items_per_sec", "p50_us", "p99_us", "p999_us", "max_us"}


def rate(result):
    """Items per second: `bench` reports it; load, check and unload report items and seconds."""
    if "items_per_sec" in result:
        return float(result["items_per_sec"])
    return result["items"] / result["seconds"]


def record(out, workload, build, rnd, expect, line):
    try:
        result = json.loads(line)
    except ValueError:
        sys.exit(f"{workload} ({build}, round {rnd}): not one line of JSON: {line[:300]!r}")
    if not isinstance(result, dict):
        sys.exit(f"{workload} ({build}, round {rnd}): not a JSON object: {line[:300]!r}")
    if result.get("interrupted"):
        sys.exit(f"{workload} ({build}, round {rnd}): interrupted: {line}")
    if result.get("items") != int(expect):
        sys.exit(f"{workload} ({build}, round {rnd}): {result.get('items')} items, expected {expect}: {line}")
    seconds = result.get("seconds")
    if not isinstance(seconds, (int, float)) or not seconds > 0 or not math.isfinite(seconds):
        sys.exit(f"{workload} ({build}, round {rnd}): no positive \"seconds\": {line}")
    value = rate(result)
    with open(out, "a") as f:
        f.write(json.dumps({"workload": workload, "build": build, "round": int(rnd),
                            "items_per_sec": value, "result": result}) + "\n")
    print(f"{value:,.0f}")


def table(out):
    rows = [json.loads(line) for line in open(out)]
    order, runs = [], {}
    for row in rows:
        w = row["workload"]
        if w not in runs:
            order.append(w)
            runs[w] = {"base": {}, "new": {}}
        runs[w][row["build"]][row["round"]] = row
    width = max([len("workload")] + [len(w) for w in order])
    print("Throughput in items/s (for every workload: `bench` reports items_per_sec; load,")
    print("check and unload: items / seconds). Ratio = new / base: > 1 means the new build is")
    print("faster, < 1 slower; below 0.90 is more than 10% slower (marked <).")
    print("pairwise = round i's new / round i's base (min / median / max over the rounds).")
    print("same = every non-timing field (items, new, present, absent, removed) equal in every")
    print("run of both builds.\n")
    head = (f"| {'workload':<{width}} | {'base median':>12} | {'new median':>12} | {'new/base':>8} "
            f"| {'pairwise min':>12} | {'pw median':>9} | {'pairwise max':>12} | {'spread':>6} | n | same |")
    print(head)
    print("|" + "|".join("-" * (len(c)) for c in head.split("|")[1:-1]) + "|")
    spreads = []
    for w in order:
        base, new = runs[w]["base"], runs[w]["new"]
        b = [rate(base[r]["result"]) for r in sorted(base)]
        n = [rate(new[r]["result"]) for r in sorted(new)]
        pairs = [rate(new[r]["result"]) / rate(base[r]["result"]) for r in sorted(base) if r in new]
        bm = statistics.median(b) if b else float("nan")
        nm = statistics.median(n) if n else float("nan")
        ratio = nm / bm if b and n else float("nan")
        fields = {json.dumps({k: v for k, v in x["result"].items() if k not in TIMING}, sort_keys=True)
                  for side in (base, new) for x in side.values()}
        same = "yes" if len(fields) == 1 else "NO"
        mark = "<" if ratio < 0.90 else " "
        if pairs:
            lo, mid, hi = min(pairs), statistics.median(pairs), max(pairs)
            spreads.append((hi - lo, w))
            cells = f"{lo:>12.3f} | {mid:>9.3f} | {hi:>12.3f} | {hi - lo:>6.3f}"
        else:
            cells = f"{'-':>12} | {'-':>9} | {'-':>12} | {'-':>6}"
        print(f"| {w:<{width}} | {bm:>12,.0f} | {nm:>12,.0f} | {ratio:>7.3f}{mark} | {cells} "
              f"| {len(pairs)} | {same:<4} |")
    if spreads:
        spreads.sort()
        print(f"\npairwise spread (max - min): median {statistics.median(s for s, _ in spreads):.3f}, "
              f"largest {spreads[-1][0]:.3f} ({spreads[-1][1]})")
    differ = [w for w in order if len({json.dumps({k: v for k, v in x["result"].items() if k not in TIMING},
                                                  sort_keys=True)
                                       for side in runs[w].values() for x in side.values()}) > 1]
    if differ:
        print("non-timing fields differ (a change of behaviour, not of speed): " + ", ".join(differ))


if __name__ == "__main__":
    if len(sys.argv) == 8 and sys.argv[1] == "record":
        record(*sys.argv[2:])
    elif len(sys.argv) == 3 and sys.argv[1] == "table":
        table(sys.argv[2])
    else:
        sys.exit(__doc__)
