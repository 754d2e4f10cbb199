-- Stores a filter's parameters beside its bits the first time, and replies with what is stored,
-- so that every client can compare them with its own.
-- KEYS[1]: the parameters (a hash, in the bits' cluster slot). KEYS[2]: the bits.
-- ARGV: field, value, field, value ...
-- Reply: the stored pairs (HGETALL); an empty array when the bits exist without parameters
-- (a filter written by another program, e.g. go-zero): the caller must not take that key over.
if redis.call("exists", KEYS[1]) == 0 then
    if redis.call("exists", KEYS[2]) == 1 then
        return {}
    end
    redis.call("hset", KEYS[1], unpack(ARGV))
end
return redis.call("hgetall", KEYS[1])
