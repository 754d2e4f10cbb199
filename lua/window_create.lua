-- After lua/window_add_head.lua (`current`, `fresh`) and lua/window_check.lua: makes the current
-- generation when it does not exist, and lists it in the ledger (lua/window_args.lua).
-- The step that creates a generation gives it its absolute expiry (lua/window_args.lua),
-- before any bit: created first, so that a refused command cannot leave bits without one.
-- A generation of at most 4 MiB is made whole, zeros of its full size (`made_bytes`, from
-- lua/window_args.lua): grown by BITFIELD from an empty string, Redis would keep up to twice
-- its length allocated (a string under 1 MB grows by doubling, past it by 1 MB more), which
-- its random bits reach after a few items. (Built by doubling: a few copies, not one step per
-- byte.) A larger one, merged by ranges, grows as its ranges are written.
if fresh then
    local at = expiry(epoch, now)
    local zeros = ""
    if made_bytes > 0 and made_bytes <= 4194304 then
        zeros = "\0"
        while #zeros * 2 <= made_bytes do
            zeros = zeros .. zeros
        end
        zeros = zeros .. string.sub(zeros, 1, made_bytes - #zeros)
    end
    if read == "bitfield_ro" then
        redis.call("set", current, zeros, "PXAT", at, "NX")
    else
        -- Before Redis 6.2 (no PXAT either): the same moment, relative to the script's clock.
        redis.call("set", current, zeros, "PX", math.max(1, at - now), "NX")
    end
    made_at(epoch, at, now)
end
