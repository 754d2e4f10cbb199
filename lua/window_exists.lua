-- Checks items against the live generations, newest first; read-only (EVAL_RO), so replicas
-- can serve it.
-- ARGV[6]: k. ARGV[7..]: k bit offsets per item.
-- Reply: one integer per item, then `verified` (see the head); per item 1 when every bit of
-- the item is set in some live generation.
local k = tonumber(ARGV[6])
local out = {}
for item = 1, (#ARGV - 6) / k do
    local first = 7 + (item - 1) * k
    local present = 0
    for i = 1, g do
        -- GETBIT by GETBIT, stopping at the first 0 (a missing key has no bits set).
        local all = 1
        for arg = first, first + k - 1 do
            if redis.call("getbit", live[i], ARGV[arg]) == 0 then
                all = 0
                break
            end
        end
        if all == 1 then
            present = 1
            break
        end
    end
    out[item] = present
end
out[#out + 1] = verified
return out
