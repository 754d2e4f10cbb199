-- ORs one range of a batch's bitmap into a filter's bits, for filters too large to merge whole.
-- KEYS[1]: the filter's bits; KEYS[2]: the range's bitmap, staged just before by
-- lua/stage_range.lua (bytes ARGV[1] .. ARGV[1] + its length - 1 of the filter); KEYS[3]: a
-- second scratch key.
-- Replies with the range's bytes from before (shorter, or empty, where the filter is shorter),
-- from which the caller tells which items were new; 0 when it sets no new bit (nothing written).
--
-- Only native commands touch the bytes: GETRANGE into KEYS[3], BITOP OR there, SETRANGE back.
-- (The range passes through Lua twice, as the reply of GETRANGE and of GET: Lua has no way to
-- hand a value from one command to the next without it.) SETRANGE is the one write to the
-- filter and comes last, after the scratch keys are gone: a refusal (ACL) or an error at any
-- step writes nothing to it. SETRANGE keeps the filter's TTL and grows the string only up to
-- the range's last byte, which holds a set bit: the same bytes as SETBITs of the offsets.
local function failed(reply)
    return type(reply) == "table" and reply.err ~= nil
end

local function give_up(reply)
    redis.pcall("del", KEYS[2], KEYS[3])
    return reply
end

local first = tonumber(ARGV[1])
local length = redis.pcall("strlen", KEYS[2])
if failed(length) then
    return give_up(length)
end
local old = redis.pcall("getrange", KEYS[1], first, first + length - 1)
if failed(old) then
    return give_up(old)
end
local steps = {
    { "set", KEYS[3], old, "px", 60000 },
    { "bitop", "or", KEYS[3], KEYS[3], KEYS[2] },
}
for _, step in ipairs(steps) do
    local reply = redis.pcall(unpack(step))
    if failed(reply) then
        return give_up(reply)
    end
end
local merged = redis.pcall("get", KEYS[3])
if failed(merged) then
    return give_up(merged)
end
local gone = redis.pcall("del", KEYS[2], KEYS[3])
if failed(gone) then
    return gone
end
-- The scratch keys' commands stay on this server (lua/stage_range.lua turned replication
-- off): replicas and the AOF get the one write to the filter, the SETRANGE of the result; and
-- nothing for a range that sets no new bit (its bytes as they were: a file loaded again),
-- which replies 0 and, recorded across retries, is quiet (lua/once_head.lua; lua/bare.lua
-- unrecorded): nothing recorded.
redis.set_repl(redis.REPL_ALL)
if merged == old then
    once_quiet = {1, 0}
    return 0
end
local set = redis.pcall("setrange", KEYS[1], first, merged)
if failed(set) then
    return set
end
return old
