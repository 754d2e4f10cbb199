-- After lua/window_add_head.lua (`current`, `fresh`) and lua/window_check.lua: makes the current
-- generation when it does not exist, and lists it in the ledger (lua/window_args.lua).
-- The step that creates a generation gives it its absolute expiry (lua/window_args.lua),
-- before any bit: created first, so that a refused command cannot leave bits without one.
if fresh then
    local at = expiry(epoch, now)
    if read == "bitfield_ro" then
        redis.call("set", current, "", "PXAT", at, "NX")
    else
        -- Before Redis 6.2 (no PXAT either): the same moment, relative to the script's clock.
        redis.call("set", current, "", "PX", math.max(1, at - now), "NX")
    end
    made_at(epoch, at, now)
end
