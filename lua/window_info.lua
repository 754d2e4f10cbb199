-- Describes the live generations; read-only.
-- Reply: {"info", NOW_MS, PARAMS_PTTL, then for each live generation that exists, newest
-- first: EPOCH, BITS_SET, BYTES, PTTL}. PARAMS_PTTL is -3 without a parameters key declared.
local out = {"info", now, -3}
if params then
    out[3] = redis.call("pttl", params)
end
for i = 1, g do
    local key = live[i]
    if redis.call("exists", key) == 1 then
        out[#out + 1] = epoch - i + 1
        out[#out + 1] = redis.call("bitcount", key)
        out[#out + 1] = redis.call("strlen", key)
        out[#out + 1] = redis.call("pttl", key)
    end
end
return out
