-- The dense add: ORs the batch's bitmap, in the scratch key KEYS[#KEYS], into the current
-- generation. The transaction that runs it reads every declared generation first (for "new")
-- and deletes the scratch key after it.
-- Reply: {"at", EPOCH}, the current generation's epoch.
local current = live[1]
redis.call("bitop", "or", current, current, KEYS[#KEYS])
-- BITOP replaced the key, and its TTL with it: the absolute expiry again, as the add sets it.
local at = math.ceil((epoch + g) * window / (g - 1)) - 1
if params then
    local left = redis.call("pttl", params)
    if left > 0 and now + left < at then
        at = now + left
    end
end
redis.call("pexpireat", current, at)
return {"at", epoch}
