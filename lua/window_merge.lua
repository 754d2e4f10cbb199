-- The dense add: ORs the batch's bitmap, in the scratch key KEYS[#KEYS], into the current
-- generation. The transaction that runs it reads every declared generation first (for "new")
-- and deletes the scratch key after it.
-- Reply: {"at", EPOCH}, the current generation's epoch (recorded: below).
-- Recorded across retries (lua/once_head.lua): ARGV[7] is the batch's bitmap, written to the
-- scratch key and deleted here; the reply, recorded, is "EPOCH:MASK:BYTES": the epoch, per
-- older live generation (newest first) "1" when it existed, and the current generation's bytes
-- from before. Older generations are never written again, so a retry that reads them (and
-- finds those that existed) tells "new" as the first attempt would have.
local current = live[1]
local scratch = KEYS[#KEYS]
local fresh = redis.call("exists", current) == 0
local recorded = ARGV[7] ~= nil
local before, mask = "", ""
-- A recorded batch all of whose bits the current generation holds (every item there already:
-- a file loaded again) writes nothing and records nothing, and replies 0: its bitmap ANDed
-- with the generation keeps every bit it has. The probe's scratch key is neither replicated
-- nor appended to the AOF (set_repl), and gone when it ends.
if recorded and not fresh then
    redis.set_repl(redis.REPL_NONE)
    redis.call("set", scratch, ARGV[7], "PX", 60000)
    -- (A refusal, by the ACL, is the merge's to report, below.)
    local bits, kept = redis.pcall("bitcount", scratch), -1
    if type(redis.pcall("bitop", "and", scratch, scratch, current)) == "number" then
        kept = redis.pcall("bitcount", scratch)
    end
    redis.call("del", scratch)
    redis.set_repl(redis.REPL_ALL)
    if type(bits) == "number" and kept == bits then
        once_quiet = {1, 0}
        return 0
    end
end
if recorded then
    -- (Gone in a minute should a refusal below stop the script before it deletes it.)
    redis.call("set", scratch, ARGV[7], "PX", 60000)
    before = redis.call("get", current) or ""
    for i = 2, g do
        mask = mask .. redis.call("exists", live[i])
    end
end
-- The generation's absolute expiry, as the add sets it (BITOP replaces the key, and its TTL
-- with it).
local at = expiry(epoch, now)
-- Every command that could be refused runs before the first write to the generation: the
-- same expiry on the scratch key (deleted after this script) proves PEXPIREAT is allowed, so
-- that a refusal cannot leave bits without an expiry.
redis.call("pexpireat", scratch, at)
redis.call("bitop", "or", current, current, scratch)
redis.call("pexpireat", current, at)
if fresh then
    made_at(epoch, at, now)
end
if recorded then
    redis.call("del", scratch)
    return string.format("%d:%s:", epoch, mask) .. before
end
return {"at", epoch}
