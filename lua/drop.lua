-- Deletes a filter (clear) or sets its TTL (expire), after checking, in the same atomic step,
-- that the key is a filter of these parameters: another program's key, or a filter of another
-- size, layout or shard count, is left untouched.
-- KEYS[1]: the bits. KEYS[2] (optional): the stored parameters beside them.
-- ARGV[1]: "del" or "pexpire". ARGV[2]: the TTL in milliseconds (for "pexpire").
-- ARGV[3]: this client's parameters ("field=value ..."). ARGV[4]: the most bytes the bits may
-- hold (ceil(bits / 8)). ARGV[5]: "1" when bits without stored parameters are a filter (the
-- go-zero layout, shared with Go: go-zero stores none), "0" when they are not.
-- Reply: the number of bits keys deleted or given a TTL (0 or 1); or, refusing, an array:
-- {"params", STORED}, {"bare", BYTES} (bits of BYTES bytes without stored parameters, when
-- ARGV[5] is "0"), or {"length", BYTES}.
-- A key of another type gets a WRONGTYPE error naming its type.
local kind = redis.call("type", KEYS[1])["ok"]
if kind ~= "string" and kind ~= "none" then
    return redis.error_reply("WRONGTYPE the key holds a " .. kind .. ", not a string")
end
if KEYS[2] then
    local stored = redis.call("get", KEYS[2])
    if stored then
        if stored ~= ARGV[3] then
            return {"params", stored}
        end
    elseif kind == "string" and ARGV[5] ~= "1" then
        return {"bare", redis.call("strlen", KEYS[1])}
    end
end
if kind == "string" then
    local bytes = redis.call("strlen", KEYS[1])
    if bytes > tonumber(ARGV[4]) then
        return {"length", bytes}
    end
end
local done
if ARGV[1] == "del" then
    done = redis.call("del", KEYS[1])
    if KEYS[2] then
        redis.call("del", KEYS[2])
    end
else
    done = redis.call("pexpire", KEYS[1], ARGV[2])
    if KEYS[2] then
        redis.call("pexpire", KEYS[2], ARGV[2])
    end
end
return done
