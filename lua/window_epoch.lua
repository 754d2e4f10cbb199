-- After lua/window_args.lua: the server's time, the current generation (or the refusal of a
-- guess more than one generation off), and the live generations' keys.
local clock = redis.call("time")
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local epoch = math.floor(now * (g - 1) / window)
if epoch > guess + 1 or epoch < guess - 1 then
    return {"epoch", now}
end
-- The live generations, newest first (the key of epoch X is KEYS[GUESS + 2 - X]).
local live = {}
for i = 0, g - 1 do
    live[i + 1] = KEYS[guess + 2 - epoch + i]
end
