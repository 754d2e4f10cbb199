-- The dense add: ORs the batch's bitmap, in the scratch key KEYS[#KEYS], into the current
-- generation. The transaction that runs it reads every declared generation first (for "new")
-- and deletes the scratch key after it.
-- Reply: {"at", EPOCH}, the current generation's epoch.
local current = live[1]
local scratch = KEYS[#KEYS]
-- The generation's absolute expiry, as the add sets it (BITOP replaces the key, and its TTL
-- with it).
local at = math.ceil((epoch + g) * window / (g - 1)) - 1
if params then
    local left = redis.call("pttl", params)
    if left > 0 and now + left < at then
        at = now + left
    end
end
if at <= now then
    at = now + 1
end
-- Every command that could be refused runs before the first write to the generation: the
-- same expiry on the scratch key (deleted after this script) proves PEXPIREAT is allowed, so
-- that a refusal cannot leave bits without an expiry.
redis.call("pexpireat", scratch, at)
redis.call("bitop", "or", current, current, scratch)
redis.call("pexpireat", current, at)
return {"at", epoch}
