-- One range of a merge by ranges as one script: this, which stages the range's bitmap (ARGV[2])
-- in the scratch key KEYS[2], then lua/merge_range.lua, which ORs it in and replies with the
-- range's bytes from before (0 when it sets no new bit). Recorded across retries (in
-- lua/once_head.lua's wrapper), that reply is recorded whole and the caller deletes the record
-- once it has it. The scratch keys live only for the script, on this server: their commands
-- are neither replicated nor appended to the AOF (set_repl; lua/merge_range.lua turns it back
-- on for its write to the filter).
redis.set_repl(redis.REPL_NONE)
local staged = redis.pcall("set", KEYS[2], ARGV[2])
if type(staged) == "table" and staged.err then
    return staged
end
