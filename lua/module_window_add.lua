-- Adds items to a module window filter (SPEC.md §7 "Windows over module filters"): the
-- generations are module filters (BF.*), one per epoch of the server's clock, as a window
-- filter's are strings (lua/window_args.lua, lua/window_epoch.lua before this, then
-- lua/module_window_check.lua, then lua/module_window_add_tail.lua). One atomic step.
-- ARGV[7]: a generation's error rate. ARGV[8]: its capacity. ARGV[9]: its expansion ("" for
-- the module's default). ARGV[10..]: the items.
-- Reply (lua/module_window_add_tail.lua): one character per item: "1" new (in no live
-- generation before), "0" seen, "F" refused (the current generation is full: that item and
-- every one after it); or a refusal of lua/window_args.lua.
local current = live[1]
-- The parameters are checked when this step makes the generation; one that exists was made
-- by a step that checked them (its name holds their hash).
local fresh = redis.call("exists", current) == 0
check = fresh
-- A user whose ACL refuses a command the step needs gets a NOPERM error naming it before
-- anything is written (a generation never exists without its expiry).
-- (Where the server cannot ask the ACL, Redis 6, each command is proven on a key of this slot
-- that holds nothing: lua/acl.lua.)
local function allowed(command)
    return plan_refusal("on the module filter", current .. ":probe", {{command, current, "x"}})
end
for _, command in ipairs({"BF.MADD", "BF.MEXISTS"}) do
    local refused = allowed(command)
    if refused then
        return refused
    end
end
if fresh then
    for _, command in ipairs({"BF.RESERVE", "PEXPIREAT"}) do
        local refused = allowed(command)
        if refused then
            return refused
        end
    end
end
