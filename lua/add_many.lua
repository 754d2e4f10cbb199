-- Adds a batch of items atomically, in input order, with exactly the SETBITs of go-zero's set
-- script for each item.
-- KEYS[1]: the filter's key. ARGV[1]: k, the offsets per item. ARGV[2..]: k offsets per item.
-- Reply: one integer per item, 1 when at least one of its bits flipped from 0 to 1, else 0.
local key = KEYS[1]
local k = tonumber(ARGV[1])
local out = {}
local arg = 2
for item = 1, (#ARGV - 1) / k do
    local new = 0
    for _ = 1, k do
        if redis.call("setbit", key, ARGV[arg], 1) == 0 then
            new = 1
        end
        arg = arg + 1
    end
    out[item] = new
end
return out
