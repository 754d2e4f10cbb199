-- Adds items to the current generation; new = in no live generation before. One atomic step.
-- ARGV[6]: k. ARGV[7..]: k bit offsets per item.
-- Reply: one integer per item, then `verified` (see the head); per item 1 when new, else 0.
-- (No local functions: each costs the script about a microsecond per run.)
local k = tonumber(ARGV[6])
local current = live[1]
local out = {}
local set = {}
local flipped = false
for item = 1, (#ARGV - 6) / k do
    local first = 7 + (item - 1) * k
    -- One BITFIELD sets the k bits and returns their old values: a 0 means the item was not
    -- in the current generation.
    for i = 0, k - 1 do
        set[4 * i + 1] = "SET"
        set[4 * i + 2] = "u1"
        set[4 * i + 3] = ARGV[first + i]
        set[4 * i + 4] = 1
    end
    local old = redis.call("bitfield", current, unpack(set, 1, 4 * k))
    local new = 0
    for _, bit in ipairs(old) do
        if bit == 0 then
            new = 1
            break
        end
    end
    if new == 1 then
        flipped = true
        -- In an older generation? GETBIT by GETBIT, stopping at the first 0, which for an
        -- absent item usually comes first (a missing key has no bits set).
        for i = 2, g do
            local all = true
            for arg = first, first + k - 1 do
                if redis.call("getbit", live[i], ARGV[arg]) == 0 then
                    all = false
                    break
                end
            end
            if all then
                new = 0
                break
            end
        end
    end
    out[item] = new
end
-- The step that creates a generation gives it its absolute expiry: the moment it leaves the
-- window (sooner when the filter was given a shorter TTL by expire). A step that changed no
-- bit created nothing.
if flipped and redis.call("pttl", current) == -1 then
    -- Redis deletes a key once its time is past `at`: at - 1 makes it go at the boundary.
    local at = math.ceil((epoch + g) * window / (g - 1)) - 1
    if params then
        local left = redis.call("pttl", params)
        if left > 0 and now + left < at then
            at = now + left
        end
    end
    redis.call("pexpireat", current, at)
end
out[#out + 1] = verified
return out
