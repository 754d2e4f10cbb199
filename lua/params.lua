-- Stores a filter's parameters beside its bits the first time, and replies with what is stored,
-- so that every client can compare them with its own.
-- KEYS[1]: the parameters (a string, in the bits' cluster slot). KEYS[2]: the bits.
-- ARGV[1]: this client's parameters ("field=value field=value ...").
-- Reply: the stored parameters; nil when the bits exist without parameters (a filter written by
-- another program, e.g. go-zero), which the caller must not take over.
local stored = redis.call("get", KEYS[1])
if stored then
    return stored
end
if redis.call("exists", KEYS[2]) == 1 then
    return false
end
redis.call("set", KEYS[1], ARGV[1])
return ARGV[1]
