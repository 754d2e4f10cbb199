-- The dense add as one script (for exact answers across retries: once_head.lua, then
-- lua/probe.lua, then this): the batch's bitmap ORed into the filter's bits with BITOP,
-- keeping the filter's TTL, through a scratch key that is gone when the script ends.
-- KEYS[1]: the bits. KEYS[2]: the scratch key. KEYS[3] (a native filter of one key): its
-- parameters, stored first when missing (as the guard's step does beside a plain write).
-- ARGV[1]: the batch's bitmap. ARGV[2]: the client's parameters (with KEYS[3]); without
-- KEYS[3], "1" when KEYS[1] must exist already (a shard of a filter whose parameters the client
-- has seen stored), else "".
-- ARGV[3]: "1" to probe first whether the batch sets a new bit (lua/probe.lua).
-- Reply: the bits from before ("" when the key did not exist), from which the caller tells
-- which items were new; 0 when the batch set no new bit (no item new: nothing written, nothing
-- recorded); or {"params", STORED} when other parameters are stored, or {"lost", KEY} when
-- they are stored but the bits are gone (SPEC.md §3): nothing written.
-- Recorded whole: the caller deletes the record once it has the reply.
if KEYS[3] then
    local stored = redis.call("get", KEYS[3])
    if not stored then
        redis.call("set", KEYS[3], ARGV[2])
    elseif stored ~= ARGV[2] then
        return {"params", stored}
    elseif redis.call("exists", KEYS[1]) == 0 then
        return {"lost", KEYS[1]}
    end
elseif ARGV[2] == "1" and redis.call("exists", KEYS[1]) == 0 then
    return {"lost", KEYS[1]}
end
-- A batch that sets no new bit (lua/probe.lua) writes nothing and records nothing.
if ARGV[3] == "1" then
    local stop = probed(KEYS[1], KEYS[2], ARGV[1])
    if stop then
        return stop
    end
end
local old = redis.call("get", KEYS[1]) or ""
local ttl = redis.call("pttl", KEYS[1])
-- (Gone in a minute should the DEL below be refused.)
redis.call("set", KEYS[2], ARGV[1], "PX", 60000)
local refused = pexpire_refused(KEYS[2], ttl)
if refused then
    return refused
end
local ored = redis.pcall("bitop", "or", KEYS[1], KEYS[1], KEYS[2])
-- After the write: a refusal here must not fail a merge that went through.
redis.pcall("del", KEYS[2])
if type(ored) == "table" then
    return ored
end
if ttl > 0 then
    redis.call("pexpire", KEYS[1], ttl)
end
return old
