-- Checks a batch of items, stopping at each item's first 0 bit like go-zero's test script.
-- KEYS[1]: the filter's key. ARGV[1]: k, the offsets per item. ARGV[2..]: k offsets per item.
-- Reply: one integer per item, 1 when every bit of the item is set, else 0.
local key = KEYS[1]
local k = tonumber(ARGV[1])
local out = {}
for item = 1, (#ARGV - 1) / k do
    local first = 2 + (item - 1) * k
    local present = 1
    for arg = first, first + k - 1 do
        if redis.call("getbit", key, ARGV[arg]) == 0 then
            present = 0
            break
        end
    end
    out[item] = present
end
return out
