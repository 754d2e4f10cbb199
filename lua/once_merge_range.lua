-- One range of a merge by ranges as one script (for exact answers across retries:
-- once_head.lua): lua/merge_range.lua's steps, the range's bitmap given as an argument instead
-- of SET into the scratch key before it in a MULTI.
-- KEYS[1]: the filter's bits. KEYS[2], KEYS[3]: two scratch keys, gone when the script ends.
-- ARGV[1]: where the bitmap goes in the bits, in bytes. ARGV[2]: the range's bitmap.
-- Reply: the range's bytes from before (shorter, or empty, where the filter is shorter), from
-- which the caller tells which items were new. Recorded whole: the caller deletes the record
-- once it has the reply.
-- Only native commands touch the bytes (GETRANGE, BITOP OR in the scratch keys, SETRANGE back,
-- which keeps the filter's TTL); SETRANGE is the one write to the filter and comes last: a
-- refusal (ACL) or an error at any step writes nothing to it, and leaves no scratch key.
local function failed(reply)
    return type(reply) == "table" and reply.err ~= nil
end

local function give_up(reply)
    redis.pcall("del", KEYS[2], KEYS[3])
    return reply
end

local first = tonumber(ARGV[1])
local old = redis.pcall("getrange", KEYS[1], first, first + #ARGV[2] - 1)
if failed(old) then
    return give_up(old)
end
local steps = {
    { "set", KEYS[2], ARGV[2] },
    { "set", KEYS[3], old },
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
local set = redis.pcall("setrange", KEYS[1], first, merged)
if failed(set) then
    return set
end
return old
