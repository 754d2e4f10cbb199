-- Which of `items` (item numbers: item I's k bit offsets are ARGV[8 + (I - 1) * k] on) have all
-- their bits set in generation `key`, read by `read`: a missing generation holds none; else
-- one read of their first bits (0 for most absent items), then one of the others of those
-- whose first bit is set. A few calls per generation for a whole step, not per item: each call
-- into Redis costs the script about a microsecond, each argument a fraction of one. Calls of at
-- most 1,000 offsets (Lua's unpack takes at most a few thousand values).
-- Returns the items found and the others (both in the order given).
local find_args = {}
-- Reads offsets `skip + 1 .. skip + count` of each of `list`'s items in `key`: those whose
-- bits are all set are appended to `yes`, the others to `no`.
local function find_sort(key, read, k, list, skip, count, yes, no)
    local argv, args = ARGV, find_args
    local per, from = math.max(1, math.floor(1000 / count)), 1
    while from <= #list do
        local last, n = math.min(#list, from + per - 1), 0
        for j = from, last do
            local first = 8 + (list[j] - 1) * k + skip
            for i = 0, count - 1 do
                args[n + 1], args[n + 2], args[n + 3] = "GET", "u1", argv[first + i]
                n = n + 3
            end
        end
        local bits = redis.call(read, key, unpack(args, 1, n))
        for j = from, last do
            local all, base = true, (j - from) * count
            for i = 1, count do
                if bits[base + i] == 0 then
                    all = false
                    break
                end
            end
            if all then
                yes[#yes + 1] = list[j]
            else
                no[#no + 1] = list[j]
            end
        end
        from = last + 1
    end
end
local function find(key, items, read, k)
    if redis.call("exists", key) == 0 then
        return {}, items
    end
    local hits, found, rest = {}, {}, {}
    find_sort(key, read, k, items, 0, 1, hits, rest)
    if k == 1 then
        return hits, rest
    end
    find_sort(key, read, k, hits, 1, k - 1, found, rest)
    return found, rest
end
