-- Adds items to a counting filter only if absent (as RedisBloom's CF.ADDNX), in order, each in
-- one atomic step: an item all of whose counters are above zero is left as it is; another has
-- each counter incremented (saturating at 15).
-- KEYS[1]: the counters. KEYS[2] (a filter of one key): the stored parameters.
-- ARGV[1]: this client's parameters (with KEYS[2]); without KEYS[2], "1" when KEYS[1] must
-- exist already (a shard of a filter whose parameters the client has seen stored). ARGV[2]: k. ARGV[3..]: k counters per item, as their bit
-- offsets (4i for counter i), which BITFIELD takes with u4.
-- Reply: one integer per item, 1 when it was added, else 0; or {"params", STORED} when the
-- stored parameters differ, or {"lost", KEY} when they are stored but the counters are gone
-- (SPEC.md §3: a write never makes a lost filter again): nothing written.
local key, k = KEYS[1], tonumber(ARGV[2])
if KEYS[2] then
    local stored = redis.call("get", KEYS[2])
    if not stored then
        if redis.call("exists", key) == 1 then
            -- bits of another kind; a key of another type is named, as a plain filter names it.
            local kind = redis.call("type", key)["ok"]
            if kind ~= "string" then
                return redis.error_reply("WRONGTYPE the key " .. key .. " holds a " .. kind .. ", not a string")
            end
            return {"params", ""}
        end
        redis.call("set", KEYS[2], ARGV[1])
    elseif stored ~= ARGV[1] then
        return {"params", stored}
    elseif redis.call("exists", key) == 0 then
        return {"lost", key}
    end
elseif ARGV[1] == "1" and redis.call("exists", key) == 0 then
    return {"lost", key}
end
local out, get, incr = {}, {}, {"OVERFLOW", "SAT"}
for i = 0, k - 1 do
    get[3 * i + 1], get[3 * i + 2] = "GET", "u4"
    incr[4 * i + 3], incr[4 * i + 4], incr[4 * i + 6] = "INCRBY", "u4", "1"
end
for item = 1, (#ARGV - 2) / k do
    local first = 3 + (item - 1) * k
    for i = 0, k - 1 do
        get[3 * i + 3] = ARGV[first + i]
        incr[4 * i + 5] = ARGV[first + i]
    end
    local present = 1
    for _, value in ipairs(redis.call("bitfield", key, unpack(get, 1, 3 * k))) do
        if value == 0 then
            present = 0
            break
        end
    end
    if present == 0 then
        redis.call("bitfield", key, unpack(incr, 1, 4 * k + 2))
    end
    out[item] = 1 - present
end
return out
