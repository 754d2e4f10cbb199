-- One range of an add by ranges into a window generation past 4 MiB (src/kinds/window/ranges.rs):
-- this head, then lua/stage_range.lua (stages the range's bitmap) and lua/merge_range.lua
-- (ORs it in, replies the range's bytes from before); in the once wrapper when recorded.
-- KEYS[1]: the generation the batch is pinned to; KEYS[2], KEYS[3]: scratch keys.
-- ARGV[1]: the range's first byte; ARGV[2]: its bitmap; ARGV[3]: the pinned epoch; ARGV[4]: the
-- window in ms; ARGV[5]: G.
-- Refusals (nothing written, nothing recorded): {"epoch", NOW_MS} when the server's epoch is no
-- longer the pinned one (an item written into an older generation could leave the window
-- early: the batch goes again into the current one); {"lost", KEY} when the generation, made
-- by the batch's first step, is gone (SETRANGE would make it again without an expiry).
do
    local clock = redis.call("time")
    local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
    local g = tonumber(ARGV[5])
    if math.floor(now * (g - 1) / tonumber(ARGV[4])) ~= tonumber(ARGV[3]) then
        return {"epoch", now}
    end
    if redis.call("exists", KEYS[1]) == 0 then
        return {"lost", KEYS[1]}
    end
end
