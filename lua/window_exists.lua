-- Checks items; read-only (EVAL_RO), so replicas can serve it. After lua/window_args.lua,
-- lua/window_check.lua and lua/window_find.lua: a generation's key exists only while the
-- generation is live (it expires the moment it leaves the window, by the server's clock), so an
-- item found in any declared key is present without asking the clock. Only an item found nowhere needs the server's time: were the
-- generations walked the live ones?
-- ARGV[7]: k. ARGV[8..]: k bit offsets per item.
-- Reply: one integer per item, then `verified` (see the head); per item 1 when every bit of
-- the item is set in some live generation.
-- The walk is lua/window_find.lua's, generation by generation over the items not found yet.
local read, k = read_command, tonumber(ARGV[7])
-- First the G generations that are live if the guess is right: KEYS[2..G+1].
local walk = {}
for i = 2, g + 1 do
    walk[#walk + 1] = KEYS[i]
end
local out, left = {}, {}
for item = 1, (#ARGV - 7) / k do
    out[item] = 0
    left[item] = item
end
local timed = false
local i = 1
while #left > 0 do
    if i > #walk then
        if timed then
            break
        end
        -- Found nowhere: the server's clock says which generations are live, once per call,
        -- and the one the guess missed (if any) joins the walk.
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
    else
        local found
        found, left = find(walk[i], left, read, k)
        for _, item in ipairs(found) do
            out[item] = 1
        end
        i = i + 1
    end
end
out[#out + 1] = verified
return out
