-- Before one range of a recorded merge by ranges (lua/once_merge_range.lua, then
-- lua/merge_range.lua; in the once wrapper, lua/once_head.lua): a range that adds no bit (every
-- bit of the batch there already: a file loaded again) writes nothing and records nothing, and
-- replies 0. The range's bytes ANDed with its bitmap keep every bit the bitmap has. The probe's
-- scratch keys are neither replicated nor appended to the AOF (set_repl), and gone when it
-- ends; an error (the ACL, the key's type) is left to the merge, which reports it.
-- (pcall throughout: a refusal must not stop the script before the scratch keys are gone.)
-- KEYS[1]: the bits; KEYS[2], KEYS[3]: scratch keys. ARGV[1]: the range's first byte;
-- ARGV[2]: its bitmap.
do
    redis.set_repl(redis.REPL_NONE)
    local kept, bits = -1, 0
    local staged = redis.pcall("set", KEYS[2], ARGV[2], "PX", 60000)
    local first = tonumber(ARGV[1])
    local range = redis.pcall("getrange", KEYS[1], first, first + #ARGV[2] - 1)
    if not staged.err and type(range) == "string" then
        bits = redis.pcall("bitcount", KEYS[2])
        local copied = redis.pcall("set", KEYS[3], range, "PX", 60000)
        -- (A refusal of BITOP, by the ACL, is the merge's to report.)
        if not copied.err
            and type(redis.pcall("bitop", "and", KEYS[3], KEYS[3], KEYS[2])) == "number" then
            kept = redis.pcall("bitcount", KEYS[3])
        end
    end
    redis.pcall("del", KEYS[2], KEYS[3])
    redis.set_repl(redis.REPL_ALL)
    if type(bits) == "number" and kept == bits then
        once_quiet = {1, 0}
        return 0
    end
end
