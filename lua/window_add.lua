-- Adds items to the current generation; new = in no live generation before. One atomic step.
-- ARGV[6]: k. ARGV[7..]: k bit offsets per item.
-- Reply: one integer per item, 1 when new, else 0.
local k = tonumber(ARGV[6])
local current = live[1]
local older = {}
for i = 2, g do
    if redis.call("exists", live[i]) == 1 then
        older[#older + 1] = live[i]
    end
end
local out = {}
for item = 1, (#ARGV - 6) / k do
    local first = 7 + (item - 1) * k
    local flipped = false
    for arg = first, first + k - 1 do
        if redis.call("setbit", current, ARGV[arg], 1) == 0 then
            flipped = true
        end
    end
    local new = 0
    if flipped then
        new = 1
        for _, key in ipairs(older) do
            local all = true
            for arg = first, first + k - 1 do
                if redis.call("getbit", key, ARGV[arg]) == 0 then
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
keep_expiry()
return out
