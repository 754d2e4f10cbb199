-- Removes items from a counting filter, in order, each in one atomic step: nothing unless
-- every counter of the item is above zero (at least as many as the times the item holds that
-- counter), then each counter less by those times; a saturated counter (15) is never
-- decremented, since it may hold more than it shows.
-- KEYS[1]: the counters (4 bits each). KEYS[2] (a filter of one key): the stored parameters,
-- checked first, since a remove from another filter's counters would take its items.
-- ARGV[1]: this client's parameters. ARGV[2]: k. ARGV[3..]: k counters per item, as their bit
-- offsets (4i for counter i), which BITFIELD takes with u4.
-- Reply: one integer per item, 1 when it was present and removed, else 0; or {"params",
-- STORED} when the stored parameters differ ("" when counters exist without any): nothing
-- written.
-- (Tables are reused from item to item: building them is most of a script's cost.)
local key, k = KEYS[1], tonumber(ARGV[2])
if KEYS[2] then
    local stored = redis.call("get", KEYS[2])
    if stored and stored ~= ARGV[1] then
        return {"params", stored}
    elseif not stored and redis.call("exists", key) == 1 then
        -- bits of another kind; a key of another type is named, as a plain filter names it.
        local kind = redis.call("type", key)["ok"]
        if kind ~= "string" then
            return redis.error_reply("WRONGTYPE the key " .. key .. " holds a " .. kind .. ", not a string")
        end
        return {"params", ""}
    end
end
local out, get, incr = {}, {}, {}
for i = 0, k - 1 do
    get[3 * i + 1], get[3 * i + 2] = "GET", "u4"
end
for item = 1, (#ARGV - 2) / k do
    local first = 3 + (item - 1) * k
    for i = 0, k - 1 do
        get[3 * i + 3] = ARGV[first + i]
    end
    local values = redis.call("bitfield", key, unpack(get, 1, 3 * k))
    -- Present when every counter is at least the times the item holds it (a counter held
    -- twice needs 2), or saturated.
    local present = 1
    for i = 1, k do
        local value = values[i]
        if value ~= 15 then
            local times = 0
            for j = first, first + k - 1 do
                if ARGV[j] == ARGV[first + i - 1] then
                    times = times + 1
                end
            end
            if value < times then
                present = 0
                break
            end
        end
    end
    if present == 1 then
        -- One decrement per time the item holds a counter, but none of a saturated one.
        local n = 0
        for i = 1, k do
            if values[i] ~= 15 then
                incr[4 * n + 1] = "INCRBY"
                incr[4 * n + 2] = "u4"
                incr[4 * n + 3] = ARGV[first + i - 1]
                incr[4 * n + 4] = "-1"
                n = n + 1
            end
        end
        if n > 0 then
            redis.call("bitfield", key, unpack(incr, 1, 4 * n))
        end
    end
    out[item] = present
end
return out
