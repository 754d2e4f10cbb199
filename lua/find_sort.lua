-- Sorts items by whether their bits are all set in one key, a few calls for a whole step (each
-- call into Redis costs a script about a microsecond, each argument a fraction of one), in
-- calls of at most 1,000 offsets (Lua's unpack takes at most a few thousand values). Item I's
-- bit offsets are ARGV[base + (I - 1) * stride] on (a window step's, lua/window_find.lua; a
-- growing add's in one level, lua/grow_add.lua).
local find_args = {}
-- Reads offsets `skip + 1 .. skip + count` of each of `list`'s items in `key` (by `read`,
-- BITFIELD_RO or BITFIELD): those whose bits are all set are appended to `yes`, the others to
-- `no`.
local function find_sort(key, read, base, stride, list, skip, count, yes, no)
    local argv, args = ARGV, find_args
    local per, from = math.max(1, math.floor(1000 / count)), 1
    while from <= #list do
        local last, n = math.min(#list, from + per - 1), 0
        for j = from, last do
            local first = base + (list[j] - 1) * stride + skip
            for i = 0, count - 1 do
                args[n + 1], args[n + 2], args[n + 3] = "GET", "u1", argv[first + i]
                n = n + 3
            end
        end
        local bits = redis.call(read, key, unpack(args, 1, n))
        for j = from, last do
            local all, at = true, (j - from) * count
            for i = 1, count do
                if bits[at + i] == 0 then
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
