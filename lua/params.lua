-- Compares a filter's parameters with those stored beside its bits, storing them the first time.
-- KEYS[1]: the parameters (a string, in the bits' cluster slot). KEYS[2]: the bits.
-- ARGV[1]: this client's parameters ("field=value ..."). ARGV[2]: "1" to store them when the
-- filter does not exist yet (a write), "0" to leave it so (a read). ARGV[3]: "1" to make the
-- bits (an empty string) with the parameters, so that they exist whenever the parameters do.
-- Reply: the stored parameters; "" when nothing exists yet and nothing was stored; the length of
-- the bits in bytes (an integer) when they exist without parameters (a filter written by another
-- program, e.g. go-zero), so that the caller can tell bits too long for its size. A key of
-- another type than string fails with WRONGTYPE.
local stored = redis.call("get", KEYS[1])
if stored then
    return stored
end
if redis.call("exists", KEYS[2]) == 1 then
    return redis.call("strlen", KEYS[2])
end
if ARGV[2] == "1" then
    if ARGV[3] == "1" then
        redis.call("set", KEYS[2], "")
    end
    redis.call("set", KEYS[1], ARGV[1])
    return ARGV[1]
end
return ""
