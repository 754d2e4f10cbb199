-- The rest of the add (see lua/window_add_head.lua), after lua/window_create.lua and
-- lua/window_find.lua.
-- First the current generation: BITFIELD sets every item's k bits and returns their old
-- values, a 0 meaning the item was not in it (one call for up to 1,000 offsets; an item that
-- comes twice in a step finds its own bits the second time, as one call per item did).
local n = (#ARGV - 7) / k
local out, new, set = {}, {}, {}
local per = math.max(1, math.floor(1000 / k))
local from = 1
while from <= n do
    local last, c = math.min(n, from + per - 1), 0
    for item = from, last do
        local first = 8 + (item - 1) * k
        for i = 0, k - 1 do
            set[c + 1], set[c + 2], set[c + 3], set[c + 4] = "SET", "u1", ARGV[first + i], "1"
            c = c + 4
        end
    end
    local old = redis.call("bitfield", current, unpack(set, 1, c))
    for item = from, last do
        local base = (item - from) * k
        out[item] = 0
        for i = 1, k do
            if old[base + i] == 0 then
                out[item] = 1
                new[#new + 1] = item
                break
            end
        end
    end
    from = last + 1
end
-- Then the older generations, for the items new to the current one: found in one, not new.
for i = 2, g do
    if #new == 0 then
        break
    end
    local found
    found, new = find(live[i], new, read, k)
    for _, item in ipairs(found) do
        out[item] = 0
    end
end
out[#out + 1] = verified
return out
