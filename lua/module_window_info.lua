-- Names a module window filter's live generations that exist; read-only, after
-- lua/window_args.lua, lua/window_epoch.lua and lua/module_window_check.lua (the client then
-- reads BF.INFO of each).
-- Reply: {"info", NOW_MS, PARAMS_PTTL, then for each live generation that exists, newest
-- first: EPOCH, KEY, PTTL}. PARAMS_PTTL is -3 without a parameters key declared.
local out = {"info", now, -3}
if params then
    out[3] = redis.call("pttl", params)
end
for i = 1, g do
    local key = live[i]
    if redis.call("exists", key) == 1 then
        out[#out + 1] = epoch - i + 1
        out[#out + 1] = key
        out[#out + 1] = redis.call("pttl", key)
    end
end
return out
