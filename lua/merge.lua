-- ORs a batch's bits into the filter at once, and replies with the filter's bytes from before,
-- from which the caller tells which items were new exactly as a SETBIT per bit would.
-- KEYS[1]: the filter's bits. KEYS[2]: a scratch key in the same slot, deleted before returning.
-- ARGV[1]: the batch's bits as a bitmap in Redis's bit order.
-- The result is the OR of the two strings: the same bytes as SETBITs of the batch's offsets.
local old = redis.call("get", KEYS[1])
local ttl = redis.call("pttl", KEYS[1])
redis.call("set", KEYS[2], ARGV[1])
redis.call("bitop", "or", KEYS[1], KEYS[1], KEYS[2])
redis.call("del", KEYS[2])
-- BITOP replaces the key, and with it the TTL: give the TTL back.
if ttl > 0 then
    redis.call("pexpire", KEYS[1], ttl)
end
return old
