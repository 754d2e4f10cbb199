-- Deletes a module window filter's generations, its ledger and its parameters (clear) or gives
-- them a TTL (expire), after lua/window_args.lua, lua/window_epoch.lua and
-- lua/module_window_check.lua, in one atomic step. A generation that would leave the window
-- sooner keeps its own expiry. Every generation that exists must be a module filter (BF.INFO
-- answers): otherwise its error, and nothing is touched.
-- ARGV[7]: "del" or "pexpire". ARGV[8]: the TTL in milliseconds (for "pexpire").
-- Reply: the number of live generations that existed.
for i = 1, g + 2 do
    if redis.call("exists", KEYS[i]) == 1 then
        local info = redis.pcall("BF.INFO", KEYS[i])
        if type(info) == "table" and info.err then
            return info
        end
    end
end
local alive = 0
for i = 1, g do
    alive = alive + redis.call("exists", live[i])
end
local ttl = tonumber(ARGV[8])
for i = 1, g + 2 do
    if ARGV[7] == "del" then
        redis.call("del", KEYS[i])
    else
        local left = redis.call("pttl", KEYS[i])
        if left == -1 or left > ttl then
            redis.call("pexpire", KEYS[i], ttl)
        end
    end
end
if ARGV[7] == "del" then
    redis.call("del", made)
else
    -- The ledger lists each generation's expiry: none later than the new TTL.
    local text = ""
    for _, entry in ipairs(ledger()) do
        text = text .. string.format("%d:%d,", entry[1], math.min(entry[2], now + ttl))
    end
    if text ~= "" then
        redis.call("set", made, text, "PX", ttl)
    end
end
if params then
    if ARGV[7] == "del" then
        redis.call("del", params)
    else
        redis.call("pexpire", params, ttl)
    end
end
return alive
