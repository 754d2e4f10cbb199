-- The dense add: ORs the batch's bitmap, in the scratch key KEYS[#KEYS], into the current
-- generation. The transaction that runs it reads every declared generation first (for "new")
-- and deletes the scratch key after it.
-- Reply: {"at", EPOCH}, the current generation's epoch.
local current = live[1]
redis.call("bitop", "or", current, current, KEYS[#KEYS])
-- BITOP replaced the key, and its TTL with it.
keep_expiry()
return {"at", epoch}
