-- The dense add (unrecorded; after lua/probe.lua): ORs a batch's bitmap (ARGV[1]) into the
-- filter's bits (KEYS[1]) with BITOP through the scratch key KEYS[2], gone when the script ends,
-- keeping the filter's TTL, which BITOP would otherwise drop. Runs inside a MULTI after
-- "GET KEYS[1]" (the bytes from before, from which the caller tells which items were new).
-- ARGV[2]: "1" to probe first (lua/probe.lua): a batch that sets no new bit writes nothing.
-- Reply: 0, or the refusal of a command.
-- The result is the OR of the two strings: the same bytes as SETBITs of the batch's offsets.
if ARGV[2] == "1" and sets_nothing(KEYS[1], KEYS[2], ARGV[1]) then
    return 0
end
local ttl = redis.call("pttl", KEYS[1])
redis.call("set", KEYS[2], ARGV[1])
local ored = redis.pcall("bitop", "or", KEYS[1], KEYS[1], KEYS[2])
redis.call("del", KEYS[2])
if type(ored) == "table" then
    return ored
end
if ttl > 0 then
    redis.call("pexpire", KEYS[1], ttl)
end
return 0
