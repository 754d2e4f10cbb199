-- `clear` or `expire` of one key of a module filter, checked in the same step: the stored
-- parameters (when they live here) must be the client's, and the key a module filter
-- (BF.INFO fails with WRONGTYPE otherwise, and changes nothing).
-- KEYS[1]: the module filter. KEYS[2] (a filter of one key): its stored parameters.
-- ARGV[1]: "del" or "pexpire". ARGV[2]: the milliseconds of a pexpire. ARGV[3]: the client's
-- parameters.
-- Reply: 1 when the module filter existed, else 0; or {"params", STORED}: nothing changed.
local key = KEYS[1]
if KEYS[2] then
    local stored = redis.call("get", KEYS[2])
    if stored and stored ~= ARGV[3] then
        return {"params", stored}
    end
end
local existed = redis.call("exists", key)
if existed == 1 then
    redis.call("BF.INFO", key)
end
for _, k in ipairs(KEYS) do
    if ARGV[1] == "del" then
        redis.call("del", k)
    else
        redis.call("pexpire", k, ARGV[2])
    end
end
return existed
