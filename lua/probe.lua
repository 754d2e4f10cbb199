-- Whether a dense add's bitmap (`bitmap`) sets no bit its filter (`key`) lacks (every item
-- there already: a file loaded again), so that the add writes nothing: the bitmap ANDed with
-- the key keeps every bit it has. The probe's scratch key is neither replicated nor appended to
-- the AOF (set_repl), and gone when it ends. Returns that, and the refusal (the ACL, the key's
-- type) of the scratch key or of BITOP, which the merge would meet too: the caller replies it
-- (refused once, as the merge alone would be). pcall throughout: a refusal must not stop the
-- script before its scratch key is gone.
local function sets_nothing(key, scratch, bitmap)
    redis.set_repl(redis.REPL_NONE)
    local staged = redis.pcall("set", scratch, bitmap, "PX", 60000)
    if staged.err then
        redis.set_repl(redis.REPL_ALL)
        return false, staged
    end
    local bits = redis.pcall("bitcount", scratch)
    local anded = redis.pcall("bitop", "and", scratch, scratch, key)
    local kept = type(anded) == "number" and redis.pcall("bitcount", scratch)
    redis.pcall("del", scratch)
    redis.set_repl(redis.REPL_ALL)
    if type(anded) ~= "number" then
        return false, anded
    end
    return type(bits) == "number" and kept == bits, nil
end
-- What a dense add replies when the probe ends it: the refusal, or 0 when the batch sets no new
-- bit (quiet: nothing recorded, lua/once_head.lua; lua/bare.lua declares the marker in an
-- unrecorded script); nil when the merge goes on.
local function probed(key, scratch, bitmap)
    local nothing, refused = sets_nothing(key, scratch, bitmap)
    if refused then
        return refused
    elseif nothing then
        once_quiet = {1, 0}
        return 0
    end
    return nil
end
-- Before a merge's BITOP, which drops the filter's TTL (`ttl`, given back after with PEXPIRE):
-- PEXPIRE proven on the scratch key (staged, with a TTL), so that a refusal (the ACL) comes
-- before the write and the batch goes by another path. Returns the refusal (the scratch key
-- then gone), or nil.
local function pexpire_refused(scratch, ttl)
    if ttl > 0 then
        local proven = redis.pcall("pexpire", scratch, 60000)
        if type(proven) == "table" then
            redis.pcall("del", scratch)
            return proven
        end
    end
    return nil
end
