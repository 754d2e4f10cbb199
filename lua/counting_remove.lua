-- Removes items from a counting filter, in order, each in one atomic step: nothing unless
-- every counter of the item is above zero (at least as many as the times the item holds that
-- counter), then each counter less by those times; a saturated counter (15) is never
-- decremented, since it may hold more than it shows.
-- KEYS[1]: the counters (4 bits each). ARGV[1]: k. ARGV[2..]: k counter indexes per item.
-- Reply: one integer per item, 1 when it was present and removed, else 0.
local key, k = KEYS[1], tonumber(ARGV[1])
local out = {}
for item = 1, (#ARGV - 1) / k do
    local first = 2 + (item - 1) * k
    local times, cells = {}, {}
    for arg = first, first + k - 1 do
        local cell = ARGV[arg]
        if times[cell] then
            times[cell] = times[cell] + 1
        else
            times[cell] = 1
            cells[#cells + 1] = cell
        end
    end
    local get = {}
    for i, cell in ipairs(cells) do
        get[3 * i - 2] = "GET"
        get[3 * i - 1] = "u4"
        get[3 * i] = "#" .. cell
    end
    local values = redis.call("bitfield", key, unpack(get, 1, 3 * #cells))
    local present = 1
    for i, cell in ipairs(cells) do
        if values[i] ~= 15 and values[i] < times[cell] then
            present = 0
            break
        end
    end
    if present == 1 then
        local ops = {}
        for i, cell in ipairs(cells) do
            if values[i] ~= 15 then
                ops[#ops + 1] = "INCRBY"
                ops[#ops + 1] = "u4"
                ops[#ops + 1] = "#" .. cell
                ops[#ops + 1] = -times[cell]
            end
        end
        if #ops > 0 then
            redis.call("bitfield", key, unpack(ops))
        end
    end
    out[item] = present
end
return out
