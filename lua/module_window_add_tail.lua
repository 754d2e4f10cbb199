-- The rest of lua/module_window_add.lua, after lua/module_window_check.lua: makes the current
-- generation when it does not exist, with BF.RESERVE and, in the same step, its absolute
-- expiry (the moment it leaves the window, sooner when the filter was given a shorter TTL by
-- expire), lists it in the ledger, then adds the items with BF.MADD; an item new to the
-- current generation is new only when no older live generation holds it (BF.MEXISTS).
if fresh then
    local at = expiry(epoch, now)
    if ARGV[9] == "" then
        redis.call("BF.RESERVE", current, ARGV[7], ARGV[8])
    else
        redis.call("BF.RESERVE", current, ARGV[7], ARGV[8], "EXPANSION", ARGV[9])
    end
    redis.call("pexpireat", current, at)
    made_at(epoch, at, now)
end
local added = redis.call("BF.MADD", current, unpack(ARGV, 10))
local flags = {}
local news = {}
local full = false
for i = 1, #ARGV - 9 do
    local v = added[i]
    if full or type(v) ~= "number" then
        full = true
        flags[i] = "F"
    elseif v == 1 then
        flags[i] = "1"
        news[#news + 1] = i
    else
        flags[i] = "0"
    end
end
-- New to the current generation: seen when an older live generation holds it.
for j = 2, g do
    if #news == 0 then
        break
    end
    if redis.call("exists", live[j]) == 1 then
        local asked = {}
        for x, i in ipairs(news) do
            asked[x] = ARGV[9 + i]
        end
        local found = redis.call("BF.MEXISTS", live[j], unpack(asked))
        local still = {}
        for x, i in ipairs(news) do
            if found[x] == 1 then
                flags[i] = "0"
            else
                still[#still + 1] = i
            end
        end
        news = still
    end
end
return table.concat(flags)
