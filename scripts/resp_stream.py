"""Writes a stream of RESP commands for `redis-cli --pipe`: N items of 14 random bit offsets
(seed 1, offsets below 20,000,000), as single-item or batched Lua scripts or BITFIELDs.
Usage: resp_stream.py lua|bfset|bfget ITEMS BATCH [SHA]"""
import random
import sys

random.seed(1)
BITS = 20_000_000


def resp(args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


mode, n, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
sha = sys.argv[4] if len(sys.argv) > 4 else ""
w = sys.stdout.buffer
for _ in range(n // batch):
    offs = [[random.randrange(BITS) for _ in range(14)] for _ in range(batch)]
    flat = [o for item in offs for o in item]
    if mode == "lua" and batch == 1:
        w.write(resp(["EVALSHA", sha, 1, "f"] + flat))
    elif mode == "lua":
        w.write(resp(["EVALSHA", sha, 1, "f", 14] + flat))
    elif mode == "bfset":
        w.write(resp(["BITFIELD", "f"] + [x for o in flat for x in ("SET", "u1", o, 1)]))
    elif mode == "bfget":
        w.write(resp(["BITFIELD_RO", "f"] + [x for o in flat for x in ("GET", "u1", o)]))
