"""Helper of scripts/compare_builds.sh.

  compare_builds.py record OUT WORKLOAD BUILD ROUND EXPECT LINE [NAME=VALUE...]
      checks LINE (the one line of JSON a `redbloom --json` command printed: an object with
      "items" == EXPECT and "seconds" > 0, not interrupted), appends one JSON line to OUT:
      {"workload", "build", "round", "items_per_sec", "result", NAME: VALUE...} and prints the rate;
      exits 1 (saying why) when LINE is not such a report
  compare_builds.py annotate IN OUT NAME=VALUE...
      appends IN's lines to OUT with the fields NAME=VALUE (VALUE as JSON when it parses)
  compare_builds.py table OUT
      the comparison table of every workload in OUT: medians of each build, the ratio
      new/base of the medians, the spread of the pairwise ratios (round i's new / round i's
      base), pairs kept although disturbed, and whether the counts (items, present, absent,
      removed; `new` apart, which varies from run to run) agreed in every run of both builds
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


def record(out, workload, build, rnd, expect, line, *extra):
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
    row = {"workload": workload, "build": build, "round": int(rnd), "items_per_sec": value, "result": result}
    row.update(fields(extra))
    with open(out, "a") as f:
        f.write(json.dumps(row) + "\n")
    print(f"{value:,.0f}")


def fields(pairs):
    """NAME=VALUE pairs as a dict, VALUE as JSON when it parses."""
    out = {}
    for pair in pairs:
        name, value = pair.split("=", 1)
        try:
            out[name] = json.loads(value)
        except ValueError:
            out[name] = value
    return out


def annotate(src, out, pairs):
    extra = fields(pairs)
    with open(out, "a") as f:
        for line in open(src):
            row = json.loads(line)
            row.update(extra)
            f.write(json.dumps(row) + "\n")


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
    print("Throughput in items/s (`bench`: its items_per_sec; load, check, unload: items / seconds).")
    print("new/base = new median / base median: > 1 means the new build is faster, < 1 slower;")
    print("under 0.90 (more than 10% slower) is marked <.")
    print("pairwise = round i's new / round i's base: min / median / max over the rounds, and")
    print("spread = max - min. n = pairs; dist = pairs kept although another process used the CPU.")
    print("same = the counts (items, present, absent, removed; `new` apart) equal in every run of")
    print("both builds; new±N: so, and `new` (load) varied by up to N items.\n")
    head = (f"| {'workload':<{width}} | {'base median':>12} | {'new median':>12} | {'new/base':>8} "
            f"| {'pairwise min':>12} | {'pw median':>9} | {'pairwise max':>12} | {'spread':>6} "
            f"| n | dist | {'same':<8} |")
    print(head)
    print("|" + "|".join("-" * (len(c)) for c in head.split("|")[1:-1]) + "|")
    spreads, differ = [], []
    for w in order:
        base, new = runs[w]["base"], runs[w]["new"]
        b = [rate(base[r]["result"]) for r in sorted(base)]
        n = [rate(new[r]["result"]) for r in sorted(new)]
        pairs = [rate(new[r]["result"]) / rate(base[r]["result"]) for r in sorted(base) if r in new]
        dist = sum(1 for r in base if r in new and (base[r].get("disturbed") or new[r].get("disturbed")))
        bm = statistics.median(b) if b else float("nan")
        nm = statistics.median(n) if n else float("nan")
        ratio = nm / bm if b and n else float("nan")
        every = [x["result"] for side in (base, new) for x in side.values()]
        counts = {json.dumps({k: v for k, v in x.items() if k not in TIMING and k != "new"}, sort_keys=True)
                  for x in every}
        news = [x["new"] for x in every if isinstance(x.get("new"), int)]
        if len(counts) > 1:
            same = "NO"
            differ.append(w)
        elif news and max(news) != min(news):
            same = f"new±{max(news) - min(news)}"
        else:
            same = "yes"
        mark = "<" if ratio < 0.90 else " "
        if pairs:
            lo, mid, hi = min(pairs), statistics.median(pairs), max(pairs)
            spreads.append((hi - lo, w))
            cells = f"{lo:>12.3f} | {mid:>9.3f} | {hi:>12.3f} | {hi - lo:>6.3f}"
        else:
            cells = f"{'-':>12} | {'-':>9} | {'-':>12} | {'-':>6}"
        print(f"| {w:<{width}} | {bm:>12,.0f} | {nm:>12,.0f} | {ratio:>7.3f}{mark} | {cells} "
              f"| {len(pairs)} | {dist:>4} | {same:<8} |")
    if spreads:
        spreads.sort()
        print(f"\npairwise spread (max - min): median {statistics.median(s for s, _ in spreads):.3f}, "
              f"largest {spreads[-1][0]:.3f} ({spreads[-1][1]})")
    if differ:
        print("counts differ between runs (a change of behaviour, not of speed): " + ", ".join(differ))


if __name__ == "__main__":
    if len(sys.argv) >= 8 and sys.argv[1] == "record":
        record(*sys.argv[2:])
    elif len(sys.argv) >= 4 and sys.argv[1] == "annotate":
        annotate(sys.argv[2], sys.argv[3], sys.argv[4:])
    elif len(sys.argv) == 3 and sys.argv[1] == "table":
        table(sys.argv[2])
    else:
        sys.exit(__doc__)
