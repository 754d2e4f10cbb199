-- One range of a merge by ranges as one script (for exact answers across retries:
-- once_head.lua, then this, then lua/merge_range.lua, then once_tail.lua). The range's bitmap
-- comes as ARGV[2] and goes into the scratch key KEYS[2] here, where the unrecorded merge SETs
-- it in the MULTI before merge_range.lua; the rest is merge_range.lua's, which replies with the
-- range's bytes from before: recorded whole, the caller deletes the record once it has them.
local staged = redis.pcall("set", KEYS[2], ARGV[2])
if type(staged) == "table" and staged.err then
    return staged
end
