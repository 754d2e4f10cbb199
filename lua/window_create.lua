-- After lua/window_add_head.lua (`current`, `fresh`) and lua/window_check.lua: makes the current
-- generation when it does not exist, and lists it in the ledger (lua/window_args.lua).
-- The step that creates a generation gives it its absolute expiry, before any bit: the moment
-- it leaves the window (sooner when the filter was given a shorter TTL by expire). Redis
-- deletes a key once its time is past `at`, so at - 1 makes it go at the boundary. (Created
-- first, so that a refused command cannot leave bits without an expiry.)
if fresh then
    local at = math.ceil((epoch + g) * window / (g - 1)) - 1
    if params then
        local left = redis.call("pttl", params)
        if left > 0 and now + left < at then
            at = now + left
        end
    end
    if at <= now then
        at = now + 1
    end
    if read == "bitfield_ro" then
        redis.call("set", current, "", "PXAT", at, "NX")
    else
        -- Before Redis 6.2 (no PXAT either): the same moment, relative to the script's clock.
        redis.call("set", current, "", "PX", math.max(1, at - now), "NX")
    end
    made_at(epoch, at, now)
end
