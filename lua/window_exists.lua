-- Checks items against the live generations; read-only (EVAL_RO), so replicas can serve it.
-- ARGV[6]: k. ARGV[7..]: k bit offsets per item.
-- Reply: one integer per item, 1 when every bit of the item is set in some live generation.
local k = tonumber(ARGV[6])
local existing = {}
for i = 1, g do
    if redis.call("exists", live[i]) == 1 then
        existing[#existing + 1] = live[i]
    end
end
local out = {}
for item = 1, (#ARGV - 6) / k do
    local first = 7 + (item - 1) * k
    local present = 0
    for _, key in ipairs(existing) do
        local all = 1
        for arg = first, first + k - 1 do
            if redis.call("getbit", key, ARGV[arg]) == 0 then
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
return out
