-- Whether a dense add's bitmap (`bitmap`) sets no bit its filter (`key`) lacks (every item
-- there already: a file loaded again), so that the add writes nothing: the bitmap ANDed with
-- the key keeps every bit it has. The probe's scratch key is neither replicated nor appended to
-- the AOF (set_repl), and gone when it ends; any error (the ACL, the key's type) answers
-- false, left to the merge that follows to report (pcall throughout: a refusal must not stop
-- the script before its scratch key is gone).
local function sets_nothing(key, scratch, bitmap)
    redis.set_repl(redis.REPL_NONE)
    local bits, kept = nil, -1
    if not redis.pcall("set", scratch, bitmap, "PX", 60000).err then
        bits = redis.pcall("bitcount", scratch)
        if type(redis.pcall("bitop", "and", scratch, scratch, key)) == "number" then
            kept = redis.pcall("bitcount", scratch)
        end
    end
    redis.pcall("del", scratch)
    redis.set_repl(redis.REPL_ALL)
    return type(bits) == "number" and kept == bits
end
