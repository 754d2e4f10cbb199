-- Which of `items` (item numbers: item I's k bit offsets are ARGV[8 + (I - 1) * k] on) have all
-- their bits set in generation `key`, read by `read`: a missing generation holds none; else
-- one read of their first bits (0 for most absent items), then one of the others of those
-- whose first bit is set. A few calls per generation for a whole step, not per item: each call
-- into Redis costs the script about a microsecond, each argument a fraction of one. Calls of at
-- most 1,000 offsets (Lua's unpack takes at most a few thousand values).
-- Returns the items found and the others (both in the order given).
local function find(key, items, read, k)
    if redis.call("exists", key) == 0 then
        return {}, items
    end
    local args, hits, found, rest = {}, {}, {}, {}
    local from = 1
    while from <= #items do
        local last, n = math.min(#items, from + 999), 0
        for j = from, last do
            args[n + 1], args[n + 2], args[n + 3] = "GET", "u1", ARGV[8 + (items[j] - 1) * k]
            n = n + 3
        end
        local bits = redis.call(read, key, unpack(args, 1, n))
        for j = from, last do
            if bits[j - from + 1] == 1 then
                hits[#hits + 1] = items[j]
            else
                rest[#rest + 1] = items[j]
            end
        end
        from = last + 1
    end
    if k == 1 then
        return hits, rest
    end
    local per = math.max(1, math.floor(1000 / (k - 1)))
    from = 1
    while from <= #hits do
        local last, n = math.min(#hits, from + per - 1), 0
        for j = from, last do
            local first = 8 + (hits[j] - 1) * k
            for i = 1, k - 1 do
                args[n + 1], args[n + 2], args[n + 3] = "GET", "u1", ARGV[first + i]
                n = n + 3
            end
        end
        local bits = redis.call(read, key, unpack(args, 1, n))
        for j = from, last do
            local all, base = true, (j - from) * (k - 1)
            for i = 1, k - 1 do
                if bits[base + i] == 0 then
                    all = false
                    break
                end
            end
            if all then
                found[#found + 1] = hits[j]
            else
                rest[#rest + 1] = hits[j]
            end
        end
        from = last + 1
    end
    return found, rest
end
