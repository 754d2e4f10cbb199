-- Checks items against a module window filter's live generations; read-only (EVAL_RO), after
-- lua/window_args.lua, lua/window_epoch.lua and lua/module_window_check.lua. A live
-- generation the ledger lists that is gone is lost data: {"lost", KEY}, not "absent".
-- ARGV[7..]: the items.
-- Reply: one integer per item: 1 when some live generation holds it (BF.MEXISTS), else 0.
-- A user whose ACL refuses BF.MEXISTS is told so, whether or not a generation exists yet.
-- (Where the server cannot ask the ACL, Redis 6, the read is proven on a key of this slot that
-- holds nothing: lua/acl.lua.)
local refused = plan_refusal("on the module filter", KEYS[2] .. ":probe", {{"BF.MEXISTS", KEYS[2], "x"}})
if refused then
    return refused
end
local gone = lost(epoch, now)
if gone then
    return {"lost", gone}
end
local out = {}
local asked = {}
for i = 1, #ARGV - 6 do
    out[i] = 0
    asked[i] = i
end
for j = 1, g do
    if #asked == 0 then
        break
    end
    if redis.call("exists", live[j]) == 1 then
        local items = {}
        for x, i in ipairs(asked) do
            items[x] = ARGV[6 + i]
        end
        local found = redis.call("BF.MEXISTS", live[j], unpack(items))
        local still = {}
        for x, i in ipairs(asked) do
            if found[x] == 1 then
                out[i] = 1
            else
                still[#still + 1] = i
            end
        end
        asked = still
    end
end
return out
