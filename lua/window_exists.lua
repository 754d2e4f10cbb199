-- Checks items; read-only (EVAL_RO), so replicas can serve it. After lua/window_args.lua
-- only: a generation's key exists only while the generation is live (it expires the moment it
-- leaves the window, by the server's clock), so an item found in any declared key is present
-- without asking the clock. Only an item found nowhere needs the server's time: were the
-- generations walked the live ones?
-- ARGV[7]: k. ARGV[8..]: k bit offsets per item.
-- Reply: one integer per item, then `verified` (see the head); per item 1 when every bit of
-- the item is set in some live generation.
-- Each call into Redis costs the script a microsecond or two: a generation is tested by GETBIT
-- of the item's first bit (0 for most absent items), and only then by one BITFIELD_RO of the
-- others.
local read, k = ARGV[6], tonumber(ARGV[7])
-- First the G generations that are live if the guess is right: KEYS[2..G+1].
local walk = {}
for i = 2, g + 1 do
    walk[#walk + 1] = KEYS[i]
end
local timed = false
local get = {}
local out = {}
for item = 1, (#ARGV - 7) / k do
    local first = 8 + (item - 1) * k
    local built = false
    local present = 0
    local i = 1
    while i <= #walk do
        if redis.call("getbit", walk[i], ARGV[first]) == 1 then
            if not built then
                for j = 1, k - 1 do
                    get[3 * j - 2] = "GET"
                    get[3 * j - 1] = "u1"
                    get[3 * j] = ARGV[first + j]
                end
                built = true
            end
            local all = 1
            if k > 1 then
                for _, bit in ipairs(redis.call(read, walk[i], unpack(get, 1, 3 * (k - 1)))) do
                    if bit == 0 then
                        all = 0
                        break
                    end
                end
            end
            if all == 1 then
                present = 1
                break
            end
        end
        i = i + 1
        if i > #walk and not timed then
            -- Found nowhere: the server's clock says which generations are live, once per
            -- call, and the one the guess missed (if any) joins the walk.
            timed = true
            local clock = redis.call("time")
            local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
            local epoch = math.floor(now * (g - 1) / window)
            if epoch > guess + 1 or epoch < guess - 1 then
                return {"epoch", now}
            elseif epoch == guess + 1 then
                walk[#walk + 1] = KEYS[1]
            elseif epoch == guess - 1 then
                walk[#walk + 1] = KEYS[g + 2]
            end
            -- A live generation the ledger lists may have been deleted: absent from it is
            -- not an answer (lua/window_args.lua).
            local gone = lost(epoch, now)
            if gone then
                return {"lost", gone}
            end
        end
    end
    out[item] = present
end
out[#out + 1] = verified
return out
