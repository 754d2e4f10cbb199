"""Prints the table of scripts/bench.sh from its results (one JSON object per line)."""
import json
import sys

rows = {}
for line in open(sys.argv[1]):
    entry = json.loads(line)
    rows[entry["label"]] = entry["result"]


def rate(label):
    r = rows.get(label)
    if r is None:
        return None
    return r.get("items_per_sec") or r["items"] / r["seconds"]


def fpr(label):
    r = rows.get(label)
    return None if r is None else (r.get("present", r.get("true", 0))) / r["items"]


def fmt(x):
    return "n/a" if x is None else f"{x:,.0f}"


def ratio(a, b):
    return "n/a" if a is None or b is None else f"{a / b:.2f}x"


print()
print("| workload | redbloom items/s | peer | peer items/s | ratio | target |")
print("|---|---|---|---|---|---|")
table = [
    ("add, 1 item per call (64 tasks, one client)", "single_add", "go-zero pattern, 50 clients", "gozero_add", ">= 2.5x"),
    ("exists, 1 item per call (64 tasks, one client)", "single_exists", "go-zero pattern, 50 clients", "gozero_exists", ">= 2.5x"),
    ("load 1M, go-zero layout, 1.4 MB filter (dense)", "load_gozero_x1", "go-zero pattern add", "gozero_add", ">= 6x"),
    ("check 1M, go-zero layout, 1.4 MB filter (dense)", "check_gozero_x1", "go-zero pattern exists", "gozero_exists", ">= 6x"),
    ("load 1M, go-zero layout, 13.8 MB filter (BITFIELD: over the 4 MiB merge limit)", "load_gozero_x10", "go-zero pattern add", "gozero_add", ">= 6x"),
    ("check 1M, go-zero layout, 13.8 MB filter (read whole, 4 MiB chunks)", "check_gozero_x10", "go-zero pattern exists", "gozero_exists", ">= 6x"),
    ("load 1M, native layout, 1%", "load_native", "RedisBloom BF.MADD x100", "redisbloom_madd", ">= 0.25x"),
    ("check 1M, native layout, 1%", "check_native", "RedisBloom BF.MEXISTS x100", "redisbloom_mexists", ">= 0.5x"),
]
for name, ours, peer_name, peer, target in table:
    print(f"| {name} | {fmt(rate(ours))} | {peer_name} | {fmt(rate(peer))} | {ratio(rate(ours), rate(peer))} | {target} |")

print()
single = rows.get("single_exists", {})
print(f"single-item exists latency (64 tasks): p50 {single.get('p50_us')} us, p99 {single.get('p99_us')} us, p99.9 {single.get('p999_us')} us (target p99 < 2000 us)")
for label, name in [("absent_gozero_x1", "go-zero layout, sized for 1M at 1%"), ("absent_native", "native layout, sized for 1M at 1%"), ("absent_gozero_x10", "go-zero layout, sized for 10M at 1%"), ("redisbloom_absent", "RedisBloom, BF.RESERVE 0.01 1M")]:
    info = rows.get(label.replace("absent", "info"), {})
    extra = f", {info['bits']} bits, k = {info['k']}, {info['bytes']} bytes" if info else ""
    f = fpr(label)
    print(f"false-positive rate on 1M absent items, {name}: {'n/a' if f is None else f'{f:.4%}'}{extra}")
