-- The rest of the add (see lua/window_add_head.lua), after lua/window_create.lua.
local out = {}
local set = {}
local get = {}
for item = 1, (#ARGV - 7) / k do
    local first = 8 + (item - 1) * k
    -- One BITFIELD sets the k bits and returns their old values: a 0 means the item was not
    -- in the current generation.
    for i = 0, k - 1 do
        set[4 * i + 1] = "SET"
        set[4 * i + 2] = "u1"
        set[4 * i + 3] = ARGV[first + i]
        set[4 * i + 4] = 1
    end
    local old = redis.call("bitfield", current, unpack(set, 1, 4 * k))
    local new = 0
    for _, bit in ipairs(old) do
        if bit == 0 then
            new = 1
            break
        end
    end
    if new == 1 then
        -- In an older generation? Its first bit by GETBIT (0 for most new items), then the
        -- others by one read.
        local built = false
        for i = 2, g do
            if redis.call("getbit", live[i], ARGV[first]) == 1 then
                if not built then
                    for j = 1, k - 1 do
                        get[3 * j - 2] = "GET"
                        get[3 * j - 1] = "u1"
                        get[3 * j] = ARGV[first + j]
                    end
                    built = true
                end
                local all = true
                if k > 1 then
                    for _, bit in ipairs(redis.call(read, live[i], unpack(get, 1, 3 * (k - 1)))) do
                        if bit == 0 then
                            all = false
                            break
                        end
                    end
                end
                if all then
                    new = 0
                    break
                end
            end
        end
    end
    out[item] = new
end
out[#out + 1] = verified
return out
