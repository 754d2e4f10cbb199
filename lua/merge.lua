-- ORs a batch's bitmap (already SET at KEYS[2]) into the filter's bits (KEYS[1]) with BITOP,
-- keeping the filter's TTL, which BITOP would otherwise drop. Runs inside a MULTI between
-- "GET KEYS[1]" (the bytes from before, from which the caller tells which items were new) and
-- "DEL KEYS[2]", so no large string passes through Lua.
-- The result is the OR of the two strings: the same bytes as SETBITs of the batch's offsets.
local ttl = redis.call("pttl", KEYS[1])
redis.call("bitop", "or", KEYS[1], KEYS[1], KEYS[2])
if ttl > 0 then
    redis.call("pexpire", KEYS[1], ttl)
end
return 0
