-- The parameters check of a module window filter's scripts (after lua/window_args.lua and
-- lua/window_epoch.lua): the stored parameters must be this client's; a write that makes a
-- generation stores them when there are none (ARGV[5] = "1"); the bare key must not hold a
-- filter of its own (a module filter another client made there, or another kind's).
if params and check then
    local stored = redis.call("get", params)
    if stored then
        if stored ~= ARGV[4] then
            return {"params", stored}
        end
    elseif redis.call("exists", KEYS[g + 5]) == 1 then
        return {"params", ""}
    elseif ARGV[5] == "1" then
        redis.call("set", params, ARGV[4])
    end
end
