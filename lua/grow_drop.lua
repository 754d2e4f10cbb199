-- Deletes a growing filter's keys, or makes them expire, after checking in the same step that
-- they are this filter's.
-- KEYS[1]: the levels' counts. KEYS[2..M+1]: the segments of levels 0..M-1 (M: the most
-- levels; a key repeats where levels share a segment). KEYS[M+2],
-- KEYS[M+3] (a filter of one key): the stored parameters and the bare key.
-- ARGV[1]: the parameters. ARGV[2]: M. ARGV[3]: "del", or a TTL in ms.
-- Reply: 1 when the filter had a level, else 0; {"params", STORED} on a mismatch (nothing
-- changed).
local counts, m, how = KEYS[1], tonumber(ARGV[2]), ARGV[3]
local params = nil
if #KEYS >= m + 3 then
    params = KEYS[m + 2]
    local stored = redis.call("get", params)
    if stored and stored ~= ARGV[1] then
        return {"params", stored}
    elseif not stored and redis.call("exists", KEYS[m + 3]) == 1 then
        -- bits of another kind; a key of another type is named, as a plain filter names it.
        local kind = redis.call("type", KEYS[m + 3])["ok"]
        if kind ~= "string" then
            return redis.error_reply("WRONGTYPE the key " .. KEYS[m + 3] .. " holds a " .. kind .. ", not a string")
        end
        return {"params", ""}
    end
end
local levels = redis.call("hlen", counts)
local doomed = {counts}
for i = 1, math.min(levels, m) do
    doomed[#doomed + 1] = KEYS[1 + i]
end
if params then
    doomed[#doomed + 1] = params
end
for _, key in ipairs(doomed) do
    if how == "del" then
        redis.call("del", key)
    else
        redis.call("pexpire", key, how)
    end
end
return levels > 0 and 1 or 0
