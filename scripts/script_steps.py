"""The per-item scripts of window and growing filters, an older revision's against the working
tree's, on a private redis-server (BENCHMARKS.md "Script steps"): the same answers and keys,
and the server's time per call (`INFO commandstats`). No dependencies beyond Python 3 and
redis-server on PATH.

  script_steps.py grow-same REV [SEED] [TRIALS] [ITEMS] [POOL] [CAPACITY]
      random steps of lua/grow_add.lua at REV and in the working tree on twin filters (1 to 5
      levels, shared segments, repeated items, a TTL, a level key of another type, steps that
      name too few levels or pass the most): replies and keys (counts, segments' bytes and
      TTLs) must match; exits 1 at the first difference
  script_steps.py grow-time REV      two levels (k 7 and 8), 1,500 calls of N new items
  script_steps.py window-same REV    random steps of the window add and check, older
                                     generations holding some items: replies must match
  script_steps.py window-time REV    400 calls of N items: adds, checks of items present and
                                     of items absent (one generation holding others)
  script_steps.py bitfield-same REV  random steps of lua/once_bitfield.lua (sets and saturating
                                     increments, chunks past 1,000 offsets, a parameters key):
                                     replies and bytes must match
  script_steps.py bitfield-time REV  1,500 calls of N items (k 14), recorded as a client sends them
  script_steps.py bitfield-parts -   where a recorded BITFIELD's time goes: the bare command, a
                                     script taking its arguments, one calling BITFIELD with them
"""
import os
import random
import re
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_counting import Redis, RedisError  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def lua(rev, name):
    """lua/NAME.lua at REV ("" for the working tree)."""
    if not rev:
        with open(os.path.join(ROOT, "lua", name + ".lua")) as f:
            return f.read()
    return subprocess.run(["git", "-C", ROOT, "show", f"{rev}:lua/{name}.lua"],
                          check=True, capture_output=True, text=True).stdout


def has(rev, name):
    return subprocess.run(["git", "-C", ROOT, "cat-file", "-e", f"{rev}:lua/{name}.lua"],
                          capture_output=True).returncode == 0


def grow_script(rev):
    """The growing add as src/kinds/growing/add.rs puts it together: lua/acl.lua and
    lua/find_sort.lua (where REV has them) before lua/grow_add.lua."""
    parts = [p for p in ("acl", "find_sort") if not rev or has(rev, p)] + ["grow_add"]
    return "\n".join(lua(rev, p) for p in parts)


def server():
    """A private redis-server on a free loopback port: (client, process)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                             "--save", "", "--appendonly", "no", "--logfile", "/dev/null"])
    for _ in range(100):
        try:
            return Redis(port), proc
        except OSError:
            time.sleep(0.05)
    raise SystemExit("redis-server did not start")


def call(r, *args):
    """A command's reply; an error reply as ("err", its message without the script's name)."""
    try:
        return r.call(*args)
    except RedisError as e:
        return ("err", str(e).split(" script:")[0])


def per_call(r, command):
    for line in r.call("INFO", "commandstats").decode().splitlines():
        if line.startswith(f"cmdstat_{command}:"):
            fields = dict(f.split("=") for f in line.split(":", 1)[1].split(","))
            return float(fields["usec_per_call"])
    return 0.0


def timed(r, commands):
    r.call("CONFIG", "RESETSTAT")
    for reply in r.pipeline(commands):
        if isinstance(reply, RedisError):
            raise reply
    return per_call(r, "evalsha")


# Growing filters: lua/grow_add.lua's KEYS and ARGV (see its head).
def grow_call(r, sha, p, s, most, ks, caps, segs, items, offs):
    keys = [f"{{{p}}}:counts"] + [f"{{{p}}}:seg{segs[i]}" for i in range(s)]
    keys += [f"{{{p}}}:params", f"{{{p}}}"]
    argv = ["P", "bitfield_ro", s, most] + ks[:s] + caps[:s]
    for item in items:
        for level in range(s):
            argv += offs[(item, level)]
    return call(r, "EVALSHA", sha, len(keys), *keys, *argv)


def same_reply(reply):
    """A reply as compared: an error's text without the script's name (Redis 6 names the
    script's SHA1 in it, "f_<sha>", and "script: <sha>" after Redis 7)."""
    if isinstance(reply, tuple):
        return (reply[0], re.sub(r"[0-9a-f]{40}", "SHA", reply[1]))
    return reply


def grow_state(r, p, segments):
    state = [r.call("HGETALL", f"{{{p}}}:counts"), r.call("GET", f"{{{p}}}:params"),
             r.call("PTTL", f"{{{p}}}:counts") > 0]
    for i in range(segments):
        key = f"{{{p}}}:seg{i}"
        kind = r.call("TYPE", key)
        state.append((kind, r.call("GET", key) if kind == "string" else None,
                      r.call("PTTL", key) > 0))
    return state


def grow_same(rev, seed=1, trials=2000, most_items=25, pool_size=15, most_capacity=6):
    r, proc = server()
    try:
        old = r.call("SCRIPT", "LOAD", grow_script(rev))
        new = r.call("SCRIPT", "LOAD", grow_script(""))
        rng = random.Random(seed)
        steps = errors = short = 0
        for trial in range(trials):
            r.call("FLUSHALL")
            most = rng.randint(1, 5)
            ks = [rng.randint(1, 5) for _ in range(most)]
            caps = [rng.randint(1, most_capacity) for _ in range(most)]
            segments = rng.randint(1, most)
            segs = sorted(rng.randrange(segments) for _ in range(most))
            bits = rng.choice([8, 30, 200, 100_000])
            pool = rng.randint(2, pool_size)
            offs = {(i, level): [str(level * 100_000 + rng.randrange(bits)) for _ in range(ks[level])]
                    for i in range(pool) for level in range(most)}
            ttl, wrong = rng.random() < 0.3, rng.random() < 0.1
            if wrong:
                for p in "ab":
                    r.call("LPUSH", f"{{{p}}}:seg{segments - 1}", "x")
            for step in range(rng.randint(1, 5)):
                s = rng.randint(1, most)
                items = [rng.randrange(pool) for _ in range(rng.randint(1, most_items))]
                if ttl and step == 0:
                    for p in "ab":
                        r.call("HSET", f"{{{p}}}:counts", 0, 0)
                        r.call("PEXPIRE", f"{{{p}}}:counts", 100_000)
                a = grow_call(r, old, "a", s, most, ks, caps, segs, items, offs)
                b = grow_call(r, new, "b", s, most, ks, caps, segs, items, offs)
                steps += 1
                if isinstance(a, tuple):
                    errors += 1
                elif a[3] < len(items):
                    short += 1
                if same_reply(a) != same_reply(b) or grow_state(r, "a", segments) != grow_state(r, "b", segments):
                    print(f"different: trial {trial} step {step}: {a} against {b}")
                    sys.exit(1)
        print(f"same: {steps} steps ({errors} refused, {short} stopped short)")
        if errors * 2 > steps:
            print("most steps were refused: the scripts did not run")
            sys.exit(1)
    finally:
        proc.terminate()


def grow_time(rev):
    r, proc = server()
    try:
        shas = {"old": r.call("SCRIPT", "LOAD", grow_script(rev)),
                "new": r.call("SCRIPT", "LOAD", grow_script(""))}
        keys = ["{a}:counts", "{a}:seg0", "{a}:seg0", "{a}:params", "{a}"]
        for n in (1, 16, 64):
            for name in ("old", "new", "old", "new"):
                r.call("FLUSHALL")
                r.call("HSET", "{a}:counts", 0, 100_000, 1, 0)
                rng = random.Random(5)
                commands = []
                for _ in range(1500):
                    argv = ["P", "bitfield_ro", 2, 3, 7, 8, 100_000, 200_000]
                    for _ in range(n):
                        argv += [str(rng.randrange(958_505)) for _ in range(7)]
                        argv += [str(958_505 + rng.randrange(1_917_011)) for _ in range(8)]
                    commands.append(Redis.encode(["EVALSHA", shas[name], len(keys), *keys, *argv]))
                us = timed(r, commands)
                print(f"grow_add {name} N={n}: {us:.1f} us a call, {us / n:.2f} us an item")
    finally:
        proc.terminate()


# Window filters: the scripts as src/kinds/window/scripts.rs puts them together.
G, K, W = 4, 7, 3_600_000
BITS = 9_585_059


def window_scripts(rev):
    find = [p for p in ("find_sort", "window_find") if not rev or has(rev, p)]
    add = ["window_args", "window_epoch", "window_add_head", "window_check", "window_create"]
    add += find + ["window_add"]
    exists = ["window_args", "window_check"] + find + ["window_exists"]
    return ("".join(lua(rev, p) for p in add), "".join(lua(rev, p) for p in exists))


def window_keys(p, guess):
    keys = [f"{{{p}}}:g:{e}" for e in range(guess + 1, guess - G - 1, -1)]
    return keys + [f"{{{p}}}:ledger", f"{{{p}}}:params", f"{{{p}}}"]


def guess():
    return int(time.time() * 1000) * (G - 1) // W


def window_call(sha, p, items):
    g = guess()
    keys = window_keys(p, g)
    argv = [g, W, G, "p1", "1", "bitfield_ro", K] + [o for item in items for o in item]
    return ["EVALSHA", sha, len(keys), *keys, *argv]


def window_same(rev, trials=300):
    r, proc = server()
    try:
        old = [r.call("SCRIPT", "LOAD", s) for s in window_scripts(rev)]
        new = [r.call("SCRIPT", "LOAD", s) for s in window_scripts("")]
        rng = random.Random(7)
        for trial in range(trials):
            r.call("FLUSHALL")
            pool = [[str(rng.randrange(BITS)) for _ in range(K)] for _ in range(40)]
            g = guess()
            setup = []
            for index in (2, 3):  # the generations of epochs guess-1 and guess-2
                if rng.random() < 0.7:
                    for item in rng.sample(pool, 10):
                        setup += [(index, o) for o in item[:K if rng.random() < 0.8 else K - 1]]
            for p in "ab":
                keys = window_keys(p, g)
                for index, o in setup:
                    r.call("SETBIT", keys[index], o, 1)
                    r.call("PEXPIRE", keys[index], 100_000)
            for step in range(4):
                items = [rng.choice(pool) for _ in range(rng.randrange(1, 30))]
                op = rng.randrange(2)
                a = call(r, *window_call(old[op], "a", items))
                b = call(r, *window_call(new[op], "b", items))
                if a != b:
                    print(f"different: trial {trial} step {step}: {a} against {b}")
                    sys.exit(1)
        print(f"same: {trials * 4} steps")
    finally:
        proc.terminate()


def window_time(rev):
    r, proc = server()
    try:
        shas = {"old": [r.call("SCRIPT", "LOAD", s) for s in window_scripts(rev)],
                "new": [r.call("SCRIPT", "LOAD", s) for s in window_scripts("")]}
        for n in (1, 4, 16, 64):
            for op, name in [(o, v) for o in ("add", "present", "absent") for v in ("old", "new")]:
                r.call("FLUSHALL")
                rng = random.Random(1)
                items = [[str(rng.randrange(BITS)) for _ in range(K)] for _ in range(400 * n)]
                if op != "add":  # the generation holds these items, or as many others
                    added = items if op == "present" else [
                        [str(rng.randrange(BITS)) for _ in range(K)] for _ in range(400 * n)]
                    for _ in r.pipeline(Redis.encode(window_call(shas["new"][0], "x", added[i:i + 500]))
                                        for i in range(0, len(added), 500)):
                        pass
                script = shas[name][0 if op == "add" else 1]
                commands = [Redis.encode(window_call(script, "x", items[i:i + n]))
                            for i in range(0, len(items), n)]
                us = timed(r, commands)
                print(f"window {op} {name} N={n}: {us:.1f} us a call")
    finally:
        proc.terminate()


# Recorded BITFIELD writes (plain and counting filters): lua/once_bitfield.lua in the once
# wrapper, as src/io/once.rs puts it together.
def bitfield_script(rev):
    return "".join(lua(rev, p) for p in ("once_head", "once_bitfield", "once_tail"))


def bitfield_call(sha, p, op, k, offsets, step, params=None):
    keys = [f"{{{p}}}"] + ([f"{{{p}}}:params"] if params else []) + [f"{{{p}}}:ring"]
    argv = [op, k, params or ""] + offsets + [step, 100, 0, 0, ""]
    return ["EVALSHA", sha, len(keys), *keys, *argv]


def bitfield_same(rev, trials=400):
    r, proc = server()
    try:
        old = r.call("SCRIPT", "LOAD", bitfield_script(rev))
        new = r.call("SCRIPT", "LOAD", bitfield_script(""))
        rng = random.Random(3)
        steps = 0
        for trial in range(trials):
            r.call("FLUSHALL")
            op, k = rng.choice(["set", "incr"]), rng.randint(1, 9)
            span = rng.choice([16, 300, 100_000])
            params = rng.choice([None, "p1"])
            if params and rng.random() < 0.2:
                for p in "ab":
                    r.call("SET", f"{{{p}}}:params", "p2")
            for step in range(rng.randint(1, 4)):
                n = rng.choice([1, 2, 7, 60, rng.randint(1, 400)])
                offsets = [str(rng.randrange(span)) for _ in range(n * k)]
                a = call(r, *bitfield_call(old, "a", op, k, offsets, step, params))
                b = call(r, *bitfield_call(new, "b", op, k, offsets, step, params))
                steps += 1
                if a != b or r.call("GET", "{a}") != r.call("GET", "{b}"):
                    print(f"different: trial {trial} step {step}: {a} against {b}")
                    sys.exit(1)
        print(f"same: {steps} steps")
    finally:
        proc.terminate()


def bitfield_time(rev):
    r, proc = server()
    try:
        shas = {"old": r.call("SCRIPT", "LOAD", bitfield_script(rev)),
                "new": r.call("SCRIPT", "LOAD", bitfield_script(""))}
        for op in ("set", "incr"):
            for n in (1, 16, 64):
                for name in ("old", "new", "old", "new"):
                    r.call("FLUSHALL")
                    rng = random.Random(5)
                    commands = [Redis.encode(bitfield_call(
                        shas[name], "x", op, 14, [str(rng.randrange(11_007_642)) for _ in range(14 * n)],
                        step)) for step in range(1500)]
                    us = timed(r, commands)
                    print(f"once_bitfield {op} {name} N={n}: {us:.1f} us a call, {us / n:.2f} us an item")
    finally:
        proc.terminate()


def bitfield_parts(_rev):
    """µs of server time per item of 64 items (14 offsets each), 1,000 calls, three rounds."""
    r, proc = server()
    try:
        scripts = {"args only": "return 1",
                   "calls BITFIELD": "redis.call('bitfield', KEYS[1], unpack(ARGV)) return 1"}
        shas = {name: r.call("SCRIPT", "LOAD", body) for name, body in scripts.items()}
        rng = random.Random(2)
        for _ in range(3):
            for name in ["bare BITFIELD", "args only", "calls BITFIELD"]:
                r.call("FLUSHALL")
                commands = []
                for _ in range(1000):
                    args = [a for _ in range(64 * 14)
                            for a in ("SET", "u1", str(rng.randrange(11_007_642)), "1")]
                    command = ["BITFIELD", "f"] if name.startswith("bare") else ["EVALSHA", shas[name], 1, "f"]
                    commands.append(Redis.encode(command + args))
                r.call("CONFIG", "RESETSTAT")
                for reply in r.pipeline(commands):
                    if isinstance(reply, RedisError):
                        raise reply
                us = per_call(r, "bitfield" if name.startswith("bare") else "evalsha")
                print(f"{name}: {us / 64:.2f} us an item")
    finally:
        proc.terminate()


if __name__ == "__main__":
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    what, rev, rest = sys.argv[1], sys.argv[2], [int(a) for a in sys.argv[3:]]
    {"grow-same": grow_same, "grow-time": grow_time, "window-same": window_same,
     "window-time": window_time, "bitfield-same": bitfield_same,
     "bitfield-time": bitfield_time, "bitfield-parts": bitfield_parts}[what](rev, *rest)
