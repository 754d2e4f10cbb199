-- The rest of a window filter's `clear` (ARGV[7] "del") or `expire` (ARGV[7] "pexpire", ARGV[8]
-- the TTL in ms), after the kind's own check of the generations' type (lua/window_drop.lua,
-- lua/module_window_drop.lua): every generation, the ledger and the parameters, in one atomic
-- step. A generation that would leave the window sooner keeps its own expiry.
-- Reply: the number of live generations that existed.
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
    -- The ledger lists each generation's expiry: none later than the new TTL, which it keeps
    -- as the filter's deadline (lua/window_args.lua: generations made later expire by then).
    local text = ""
    for _, entry in ipairs(ledger()) do
        text = text .. string.format("%d:%d,", entry[1], math.min(entry[2], now + ttl))
    end
    if text ~= "" then
        text = text .. string.format("u:%d,", now + ttl)
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
