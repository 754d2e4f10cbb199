-- Checks items against every level of a growing filter (read-only, so replicas may serve it).
-- KEYS[1]: the levels' counts (a hash; its length is the number of levels L). KEYS[2..S+1]:
-- levels 0..S-1. KEYS[S+2], KEYS[S+3] (a filter of one key, until the client has seen its
-- parameters stored): the stored parameters and the bare key.
-- ARGV[1]: the parameters. ARGV[2]: the command that reads bits. ARGV[3]: S. ARGV[4..3+S]: k of
-- each level. ARGV[4+S]: per item, the bit offsets in levels 0..S-1, in order, each as 4 bytes
-- big-endian.
-- Reply: {L, VERIFIED, flag_1, ...} (1 = present; L the levels, or S when every item was found);
-- {L, VERIFIED} alone when an item was found nowhere and the filter has more levels than S
-- (the client asks again naming them); {"params", STORED} on a mismatch.
local counts, read, s = KEYS[1], ARGV[2], tonumber(ARGV[3])
local verified = 0
if #KEYS >= s + 3 then
    local stored = redis.call("get", KEYS[s + 2])
    if stored then
        if stored ~= ARGV[1] then
            return {"params", stored}
        end
        verified = 1
    elseif redis.call("exists", KEYS[s + 3]) == 1 then
        return {"params", ""}
    end
end
local k, start, fmt = {}, {}, {}
local width = 0
for i = 1, s do
    k[i] = tonumber(ARGV[3 + i])
    start[i] = 4 * width
    width = width + k[i]
end
-- Levels S..1, newest first (it holds the most items), one read of each level's bits; the
-- number of levels only when an item was found nowhere (a level past S would then matter).
local out = {s, verified}
local get = {}
local packed = ARGV[4 + s]
local missing = false
for item = 1, #packed / (4 * width) do
    local base = 1 + (item - 1) * 4 * width
    local present = 0
    for level = s, 1, -1 do
        if not fmt[level] then
            fmt[level] = ">" .. string.rep("I4", k[level])
        end
        local offsets = {struct.unpack(fmt[level], packed, base + start[level])}
        for j = 1, k[level] do
            get[3 * j - 2] = "GET"
            get[3 * j - 1] = "u1"
            get[3 * j] = offsets[j]
        end
        local all = true
        for _, bit in ipairs(redis.call(read, KEYS[1 + level], unpack(get, 1, 3 * k[level]))) do
            if bit == 0 then
                all = false
                break
            end
        end
        if all then
            present = 1
            break
        end
    end
    missing = missing or present == 0
    out[2 + item] = present
end
if missing then
    local levels = redis.call("hlen", counts)
    if levels > s then
        return {levels, verified}
    end
    out[1] = levels
end
return out
