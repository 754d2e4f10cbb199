-- Adds items to the current generation; new = in no live generation before. One atomic step:
-- lua/window_args.lua, lua/window_epoch.lua, this, lua/window_check.lua, lua/window_create.lua,
-- lua/window_find.lua, lua/window_add.lua.
-- ARGV[7]: k. ARGV[8..]: k bit offsets per item.
-- Reply: one integer per item, then `verified` (see the head); per item 1 when new, else 0.
-- (Few calls into Redis, a few per step rather than per item: each costs the script about a
-- microsecond.)
local read, k = read_command, tonumber(ARGV[7])
local current = live[1]
-- A live generation the ledger lists that is gone (deleted, evicted): its items are lost, and
-- this step would answer "new" for them: nothing is written (SPEC.md §3: losses are loud on
-- writes too; generations that left the window are not losses).
local gone = lost(epoch, now)
if gone then
    return {"lost", gone}
end
-- The older generations are read after the step's first write (lua/window_add.lua): their
-- read (of the first of them) is asked of the ACL first (lua/acl.lua), so that a refusal stops
-- the script before it writes (the caller, taking it for a step that wrote nothing, would add
-- the items again and answer "seen" for those this one added).
if g >= 2 then
    local refused = bitfield_refusal("on the older generations", read, live[2])
    if refused then
        return refused
    end
end
-- The parameters are checked when this step creates the generation; one that exists was
-- created by a step that checked them (its name holds their hash), so they are this filter's.
local fresh = redis.call("exists", current) == 0
check = fresh
if not fresh then
    verified = 1
end
