-- The dense add (after lua/probe.lua): ORs the batch's bitmap, through the scratch key
-- KEYS[#KEYS], into the current generation. The transaction that runs it reads every declared
-- generation first (for "new").
-- ARGV[7]: the bitmap, staged here (the scratch key gone when the script ends); "" when the
-- transaction SET it into the scratch key before and DELs it after. ARGV[8]: "record" when
-- recorded across retries, else "bare". ARGV[9]: "1" to probe first: a batch all of whose bits
-- the current generation holds (every item there already: a file loaded again) writes
-- nothing, records nothing (once_quiet: lua/once_head.lua, or lua/bare.lua) and replies 0.
-- Reply: {"at", EPOCH}, the current generation's epoch.
-- Recorded (lua/once_head.lua), the reply, recorded, is "EPOCH:MASK:BYTES": the epoch, per
-- older live generation (newest first) "1" when it existed, and the current generation's bytes
-- from before. Older generations are never written again, so a retry that reads them (and
-- finds those that existed) tells "new" as the first attempt would have.
local current = live[1]
local scratch = KEYS[#KEYS]
-- A live generation the ledger lists that is gone: refused, nothing written (as
-- lua/window_add_head.lua).
local gone = lost(epoch, now)
if gone then
    return {"lost", gone}
end
local fresh = redis.call("exists", current) == 0
local bitmap, recorded = ARGV[7], ARGV[8] == "record"
if ARGV[9] == "1" and not fresh then
    local stop = probed(current, scratch, bitmap)
    if stop then
        return stop
    end
end
if bitmap ~= "" then
    -- (Gone in a minute should a refusal below stop the script before it deletes it.)
    redis.call("set", scratch, bitmap, "PX", 60000)
end
local before, mask = "", ""
if recorded then
    before = redis.call("get", current) or ""
    for i = 2, g do
        mask = mask .. redis.call("exists", live[i])
    end
end
-- The generation's absolute expiry, as the add sets it (BITOP replaces the key, and its TTL
-- with it).
local at = expiry(epoch, now)
-- Every command that could be refused runs before the first write to the generation: the
-- same expiry on the scratch key (deleted below) proves PEXPIREAT is allowed, so that a
-- refusal cannot leave bits without an expiry.
redis.call("pexpireat", scratch, at)
local ored = redis.pcall("bitop", "or", current, current, scratch)
if bitmap ~= "" then
    -- After the write: a refusal here must not fail a merge that went through.
    redis.pcall("del", scratch)
end
if type(ored) == "table" then
    return ored
end
redis.call("pexpireat", current, at)
if fresh then
    made_at(epoch, at, now)
end
if recorded then
    return string.format("%d:%s:", epoch, mask) .. before
end
return {"at", epoch}
