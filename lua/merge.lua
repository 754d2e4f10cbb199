-- The dense add (unrecorded; after lua/probe.lua): ORs a batch's bitmap into the filter's bits
-- (KEYS[1]) with BITOP through the scratch key KEYS[2], keeping the filter's TTL, which BITOP
-- would otherwise drop. Runs inside a MULTI after "GET KEYS[1]" (the bytes from before, from
-- which the caller tells which items were new).
-- ARGV[1], when given: the bitmap, probed first (a batch that sets no new bit writes nothing)
-- and staged here, the scratch key gone when the script ends; without it the MULTI SETs the
-- bitmap into KEYS[2] before and DELs it after.
-- Reply: 0, or the refusal of a command.
-- The result is the OR of the two strings: the same bytes as SETBITs of the batch's offsets.
local bitmap = ARGV[1]
if bitmap then
    local stop = probed(KEYS[1], KEYS[2], bitmap)
    if stop then
        return stop
    end
    -- (Gone in a minute should the DEL below be refused.)
    redis.call("set", KEYS[2], bitmap, "PX", 60000)
end
local ttl = redis.call("pttl", KEYS[1])
local refused = pexpire_refused(KEYS[2], ttl)
if refused then
    return refused
end
local ored = redis.pcall("bitop", "or", KEYS[1], KEYS[1], KEYS[2])
if bitmap then
    -- After the write: a refusal here must not fail a merge that went through.
    redis.pcall("del", KEYS[2])
end
if type(ored) == "table" then
    return ored
end
if ttl > 0 then
    redis.call("pexpire", KEYS[1], ttl)
end
return 0
