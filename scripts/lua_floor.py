#!/usr/bin/env python3
"""Where a recorded write's server time goes: one go-zero step (15.6 items x 14 offsets = 218
bit offsets, as group commit's steps under 64 single-item callers average) as a bare BITFIELD,
and as the same write inside a Lua script in several shapes. Server time is `INFO
commandstats`' usec_per_call of EVALSHA (the script, its BITFIELD included) and of BITFIELD.

    python3 -m venv /tmp/v && /tmp/v/bin/pip install redis
    /tmp/v/bin/python scripts/lua_floor.py [PORT] [ROUNDS]

PORT: a redis-server of your own on 127.0.0.1 (it is flushed). Prints the median of ROUNDS
rounds (3) of 3,000 calls each, and each shape's ratio to the bare BITFIELD.
"""
import random
import statistics
import sys

import redis

PORT = int(sys.argv[1]) if len(sys.argv) > 1 else 7001
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 3
OFFSETS, CALLS, M = 218, 3000, 1 << 24

SHAPES = {
    # What lua/once_bitfield.lua does: BITFIELD's arguments built from ARGV in Lua.
    "bitfield, args built in Lua": """
local args, n = {}, 0
for j = 1, #ARGV do args[n+1], args[n+2], args[n+3], args[n+4] = 'SET', 'u1', ARGV[j], '1'; n = n + 4 end
local new = 0
for _, v in ipairs(redis.call('bitfield', KEYS[1], unpack(args, 1, n))) do if v == 0 then new = new + 1 end end
return new""",
    # The client sends BITFIELD's arguments ready (4 per offset).
    "bitfield, args sent ready": """
local new = 0
for _, v in ipairs(redis.call('bitfield', KEYS[1], unpack(ARGV))) do if v == 0 then new = new + 1 end end
return new""",
    # go-zero's own set script: one SETBIT per offset.
    "setbit per offset": """
local new = 0
for j = 1, #ARGV do if redis.call('setbit', KEYS[1], ARGV[j], 1) == 0 then new = new + 1 end end
return new""",
    # Offsets packed 4 bytes each into one argument.
    "packed offsets, bitfield": """
local s, args, n = ARGV[1], {}, 0
for p = 1, #s, 4 do args[n+1], args[n+2], args[n+3], args[n+4] = 'SET', 'u1', struct.unpack('>I4', s, p), 1; n = n + 4 end
local new = 0
for _, v in ipairs(redis.call('bitfield', KEYS[1], unpack(args, 1, n))) do if v == 0 then new = new + 1 end end
return new""",
    # The floor of any script given the offsets: it only counts its arguments.
    "script that writes nothing": "return #ARGV",
}


def args_for(shape, offsets):
    if shape.startswith("packed"):
        return [b"".join(o.to_bytes(4, "big") for o in offsets)]
    if shape == "bitfield, args sent ready":
        return [a for o in offsets for a in ("SET", "u1", o, 1)]
    return offsets


def timed(r, send):
    r.config_resetstat()
    pipe = r.pipeline(transaction=False)
    for i in range(CALLS):
        send(pipe, [random.randrange(M) for _ in range(OFFSETS)])
        if i % 100 == 99:
            pipe.execute()
    pipe.execute()
    return r.info("commandstats")


def main():
    r = redis.Redis(port=PORT)
    r.flushall()
    r.setbit("f", M - 1, 0)
    shas = {name: r.script_load(src) for name, src in SHAPES.items()}
    results = {name: [] for name in ["bare BITFIELD"] + list(SHAPES)}
    for _ in range(ROUNDS):
        stats = timed(r, lambda p, o: p.execute_command(
            "BITFIELD", "f", *[a for x in o for a in ("SET", "u1", x, 1)]))
        results["bare BITFIELD"].append(stats["cmdstat_bitfield"]["usec_per_call"])
        for name, sha in shas.items():
            stats = timed(r, lambda p, o: p.evalsha(sha, 1, "f", *args_for(name, o)))
            results[name].append(stats["cmdstat_evalsha"]["usec_per_call"])
    bare = statistics.median(results["bare BITFIELD"])
    print(f"{'shape':32} {'us/call':>8} {'x bare':>7}  ({OFFSETS} offsets, median of {ROUNDS})")
    for name, values in results.items():
        m = statistics.median(values)
        print(f"{name:32} {m:8.1f} {m / bare:7.2f}")


main()
