"""Helper of scripts/bench_counting.sh: a small pipelining Redis client over a raw socket (no
dependencies), and the summary tables. Each command prints one line of JSON.

  bench_counting.py cmd PORT ARG...                 one command; its reply as JSON
  bench_counting.py hash PORT SRC DST COUNTERS      rueidisprob's layout of the counting filter
                                                    at SRC: HSET DST index count, one field per
                                                    counter in use (pipelined)
  bench_counting.py cf PORT add|exists KEY FILE     CF.ADD / CF.EXISTS of every line (pipelined)
  bench_counting.py summary RESULTS                 the tables, from the JSONL results
"""
import json
import socket
import statistics
import sys
import time

WINDOW = 5000  # commands sent before their replies are read


class Redis:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", int(port)))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.reader = self.sock.makefile("rb", buffering=1 << 20)

    @staticmethod
    def encode(args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        return b"".join(out)

    def reply(self):
        line = self.reader.readline()
        if not line:
            raise ConnectionError("connection closed")
        kind, rest = line[:1], line[1:-2]
        if kind in (b"+",):
            return rest.decode()
        if kind == b"-":
            return RedisError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.reader.read(n + 2)
            return data[:-2]
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self.reply() for _ in range(n)]
        raise ValueError(f"unexpected reply {line!r}")

    def call(self, *args):
        self.sock.sendall(self.encode(args))
        r = self.reply()
        if isinstance(r, RedisError):
            raise r
        return r

    def pipeline(self, commands):
        """Sends encoded commands WINDOW at a time; yields every reply, in order."""
        batch = []
        for cmd in commands:
            batch.append(cmd)
            if len(batch) == WINDOW:
                self.sock.sendall(b"".join(batch))
                for _ in range(len(batch)):
                    yield self.reply()
                batch = []
        if batch:
            self.sock.sendall(b"".join(batch))
            for _ in range(len(batch)):
                yield self.reply()


class RedisError(Exception):
    pass


def jsonable(value):
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    if isinstance(value, list):
        return [jsonable(v) for v in value]
    if isinstance(value, RedisError):
        return {"error": str(value)}
    return value


def cmd(port, *args):
    print(json.dumps(jsonable(Redis(port).call(*args))))


def counters(data, n):
    """(index, count) of every non-zero 4-bit counter below n: counter i is bits 4i..4i+3 of
    the string in Redis bit order (most significant first), so an even i is the high nibble of
    byte i/2 and an odd i its low nibble."""
    for j, byte in enumerate(data):
        if byte:
            hi, lo = byte >> 4, byte & 15
            if hi and 2 * j < n:
                yield 2 * j, hi
            if lo and 2 * j + 1 < n:
                yield 2 * j + 1, lo


def hash_layout(port, src, dst, n):
    r = Redis(port)
    started = time.perf_counter()
    data = r.call("GET", src) or b""
    r.call("DEL", dst)
    per_command = 500
    dst_b = dst.encode()
    seen = {"in_use": 0, "saturated": 0}

    def commands():
        args = [b"HSET", dst_b]
        for index, count in counters(data, int(n)):
            seen["in_use"] += 1
            seen["saturated"] += count == 15
            args.append(b"%d" % index)
            args.append(b"%d" % count)
            if len(args) == 2 + 2 * per_command:
                yield Redis.encode(args)
                args = [b"HSET", dst_b]
        if len(args) > 2:
            yield Redis.encode(args)

    errors = sum(isinstance(reply, RedisError) for reply in r.pipeline(commands()))
    fields = r.call("HLEN", dst)
    print(json.dumps({
        "string_bytes": len(data),
        "counters": int(n),
        "in_use": seen["in_use"],
        "saturated": seen["saturated"],
        "fields": fields,
        "errors": errors,
        "seconds": time.perf_counter() - started,
    }))


def cf(port, op, key, path):
    r = Redis(port)
    name = {"add": b"CF.ADD", "exists": b"CF.EXISTS"}[op]
    head = b"*3\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(name), name, len(key), key.encode())

    def commands():
        with open(path, "rb") as f:
            for line in f:
                item = line.rstrip(b"\n")
                yield head + b"$%d\r\n%s\r\n" % (len(item), item)

    started = time.perf_counter()
    items = present = 0
    errors = []
    for reply in r.pipeline(commands()):
        items += 1
        if isinstance(reply, RedisError):
            if len(errors) < 3:
                errors.append(str(reply))
        elif reply == 1:
            present += 1
    seconds = time.perf_counter() - started
    out = {"items": items, "seconds": seconds, "items_per_sec": items / seconds, "errors": errors}
    out["added" if op == "add" else "present"] = present
    print(json.dumps(out))


def summary(path):
    by = {}
    for line in open(path):
        row = json.loads(line)
        by.setdefault(row["label"], []).append(row["result"])

    def rate(label):
        rows = by.get(label)
        if not rows:
            return None
        return statistics.median(r.get("items_per_sec") or r["items"] / r["seconds"] for r in rows)

    def fmt(x, spec=",.0f"):
        return "n/a" if x is None else format(x, spec)

    rounds = len(by.get("plain_add", []))
    bulk = by["counting_load"][0]["items"] if "counting_load" in by else None
    single = by["counting_add"][0]["items"] if "counting_add" in by else None
    print()
    print(f"Throughput, median of {rounds} round(s) (single: {single:,} items, bulk: {bulk:,} items):")
    print()
    print("| workload | plain items/s | counting items/s | ratio | target | met |")
    print("|---|---|---|---|---|---|")
    table = [
        ("add, 1 item per call, 64 tasks", "plain_add", "counting_add", 0.5),
        ("exists, 1 item per call, 64 tasks", "plain_exists", "counting_exists", 0.5),
        ("remove, 1 item per call, 64 tasks (vs plain add)", "plain_add", "counting_remove", 0.3),
        (f"load {bulk:,}", "plain_load", "counting_load", 0.3),
        (f"check {bulk:,}", "plain_check", "counting_check", 0.3),
        (f"unload {bulk:,} (vs plain load)", "plain_load", "counting_unload", 0.3),
    ]
    for name, plain, counting, target in table:
        p, c = rate(plain), rate(counting)
        ratio = None if p is None or c is None else c / p
        met = "n/a" if ratio is None else ("yes" if ratio >= target else "NO")
        print(f"| {name} | {fmt(p)} | {fmt(c)} | {fmt(ratio, '.2f')}x | >= {target}x | {met} |")
    print()
    for label in ["plain_exists", "counting_exists", "counting_remove"]:
        if label in by:
            lat = by[label]
            p50 = statistics.median(r["p50_us"] for r in lat)
            p99 = statistics.median(r["p99_us"] for r in lat)
            print(f"{label.replace('_', ' ')} latency: p50 {p50:.0f} us, p99 {p99:.0f} us")
    left = [r["counters_in_use"] for r in by.get("counting_after_unload", [])]
    if left:
        print(f"counters still in use after unload of every loaded item (per round): {left}")

    def fpr(label):
        rows = by.get(label)
        if not rows:
            return None
        return statistics.median(r["present"] / r["items"] for r in rows)

    mem = {row_label: rows[-1] for row_label, rows in by.items() if row_label.startswith("mem_")}
    print()
    print(f"Memory, {bulk:,} items at a 1% target (MEMORY USAGE ... SAMPLES 0; false positives on "
          f"{bulk:,} items never added):")
    print()
    print("| structure | bytes | bytes/item | used_memory delta | false-positive rate |")
    print("|---|---|---|---|---|")
    for label, name, fpr_label in [
        ("mem_plain", "redbloom plain (native layout), reference", "plain_absent"),
        ("mem_counting", "redbloom counting (4-bit counters, one string)", "counting_absent"),
        ("mem_hash", "rueidisprob layout (hash: field per counter in use)", "counting_absent"),
        ("mem_cf_sized", None, "cf_sized_absent"),
        ("mem_cf_default", None, "cf_default_absent"),
    ]:
        m = mem.get(label)
        if m is None:
            continue
        name = name or m["name"]
        f = fpr(fpr_label)
        note = " (same counters)" if label == "mem_hash" else ""
        delta = m.get("used_memory_delta")
        print(f"| {name} | {m['bytes']:,} | {m['bytes'] / bulk:.2f} | "
              f"{fmt(delta)} | {fmt(f, '.4%')}{note} |")
    if "mem_counting" in mem:
        m = mem["mem_counting"]
        print()
        print(f"counting filter: {m['counters']:,} counters, k = {m['k']}, {m['in_use']:,} in use, "
              f"{m['saturated']} saturated; its params key adds {m['params_bytes']:,} bytes")
    if "mem_hash" in mem:
        m = mem["mem_hash"]
        print(f"rueidisprob layout: {m['fields']:,} fields (counters in use read from the counting "
              f"filter's string: {m['in_use']:,}; the filter's own info: {m['info_in_use']:,})")
    for label in ["mem_cf_sized", "mem_cf_default"]:
        if label in mem:
            m = mem[label]
            print(f"{m['name']}: {m['info']}; CF.ADD {m['add_items_per_sec']:,.0f} items/s pipelined"
                  + (f"; errors: {m['errors']}" if m["errors"] else ""))
    if "cf_missing" in by:
        print(f"RedisBloom: {by['cf_missing'][-1]['reason']}")


if __name__ == "__main__":
    what, args = sys.argv[1], sys.argv[2:]
    if what == "cmd":
        cmd(*args)
    elif what == "hash":
        hash_layout(*args)
    elif what == "cf":
        cf(*args)
    elif what == "summary":
        summary(*args)
    else:
        sys.exit(__doc__)
