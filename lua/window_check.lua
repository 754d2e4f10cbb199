-- The parameters check (after lua/window_args.lua): the stored parameters must be this
-- client's; a write stores them when there are none; the bare key must not hold another
-- kind's bits.
if params and check then
    local stored = redis.call("get", params)
    if stored then
        if stored ~= ARGV[4] then
            return {"params", stored}
        end
        verified = 1
    elseif redis.call("exists", KEYS[g + 5]) == 1 then
        -- bits of another kind; a key of another type is named, as a plain filter names it.
        local kind = redis.call("type", KEYS[g + 5])["ok"]
        if kind ~= "string" then
            return redis.error_reply("WRONGTYPE the key " .. KEYS[g + 5] .. " holds a " .. kind .. ", not a string")
        end
        return {"params", ""}
    elseif ARGV[5] == "1" then
        redis.call("set", params, ARGV[4])
        verified = 1
    end
end
