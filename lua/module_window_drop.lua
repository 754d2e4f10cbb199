-- Deletes a module window filter's generations, its ledger and its parameters (clear) or gives
-- them a TTL (expire), after lua/window_args.lua, lua/window_epoch.lua and
-- lua/module_window_check.lua, in one atomic step. A generation that would leave the window
-- sooner keeps its own expiry. Every generation that exists must be a module filter (BF.INFO
-- answers): otherwise its error, and nothing is touched.
-- ARGV[7]: "del" or "pexpire". ARGV[8]: the TTL in milliseconds (for "pexpire").
-- Then lua/window_drop_keys.lua.
for i = 1, g + 2 do
    if redis.call("exists", KEYS[i]) == 1 then
        local info = redis.pcall("BF.INFO", KEYS[i])
        if type(info) == "table" and info.err then
            return info
        end
    end
end
