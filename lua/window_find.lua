-- Which of `items` (item numbers: item I's k bit offsets are ARGV[8 + (I - 1) * k] on) have all
-- their bits set in generation `key`, read by `read`: a missing generation holds none; else
-- one read of their first bits (0 for most absent items), then one of the others of those
-- whose first bit is set. A few calls per generation for a whole step, not per item: each call
-- into Redis costs the script about a microsecond, each argument a fraction of one. Calls of at
-- most 1,000 offsets (Lua's unpack takes at most a few thousand values).
-- Returns the items found and the others (both in the order given). (find_sort:
-- lua/find_sort.lua.)
local function find(key, items, read, k)
    if redis.call("exists", key) == 0 then
        return {}, items
    end
    local hits, found, rest = {}, {}, {}
    find_sort(key, read, 8, k, items, 0, 1, hits, rest)
    if k == 1 then
        return hits, rest
    end
    find_sort(key, read, 8, k, hits, 1, k - 1, found, rest)
    return found, rest
end
