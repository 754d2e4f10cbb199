-- Adds items to a module filter (the server's own Bloom filter, BF.*), making it first with
-- the client's parameters when it does not exist (SPEC.md §7), in one atomic step.
-- KEYS[1]: the module filter. KEYS[2] (a filter of one key): its stored parameters.
-- ARGV[1]: the client's parameters ("field=value ..."). ARGV[2]: "1" when the client compared
-- the parameters of a filter another client made (BF.INFO) and may write into it, "N" when
-- that filter is non-scaling, "0" otherwise. ARGV[3]: the
-- error rate. ARGV[4]: the capacity. ARGV[5]: the expansion ("" for the module's default).
-- ARGV[6..]: the items.
-- Reply: one character per item: "1" new, "0" seen before, "F" refused (the filter is full:
-- that item and every one after it); or {"params", STORED} when other parameters are stored,
-- {"lost", KEY} when they are stored but the filter is gone,
-- or {"foreign", ""} when KEYS[1] was made by another client and the client has not compared
-- its parameters: nothing written. A user whose ACL refuses a BF.* command it needs gets a
-- NOPERM error naming it (a script's own refusal would not), before anything is written.
local key = KEYS[1]
-- (Where the server cannot ask the ACL, Redis 6, each command is proven on a key of this slot
-- that holds nothing: lua/acl.lua.)
local probe = (KEYS[2] or key) .. ":probe"
local function allowed(command)
    return plan_refusal("on the module filter", probe, {{command, key, "x"}})
end
local stored = KEYS[2] and redis.call("get", KEYS[2])
if stored and stored ~= ARGV[1] then
    return {"params", stored}
end
local refused = allowed(ARGV[2] == "N" and "BF.ADD" or "BF.MADD")
if refused then
    return refused
end
if redis.call("exists", key) == 0 then
    -- Stored with the filter, in the step that made it: the filter is gone (SPEC.md §3: a
    -- write never makes a lost filter again).
    if stored then
        return {"lost", key}
    end
    refused = allowed("BF.RESERVE")
    if refused then
        return refused
    end
    if ARGV[5] == "" then
        redis.call("BF.RESERVE", key, ARGV[3], ARGV[4])
    else
        redis.call("BF.RESERVE", key, ARGV[3], ARGV[4], "EXPANSION", ARGV[5])
    end
    if KEYS[2] then
        redis.call("set", KEYS[2], ARGV[1])
    end
elseif KEYS[2] and not stored and ARGV[2] == "0" then
    return {"foreign", ""}
end
local added
if ARGV[2] == "N" then
    -- A non-scaling filter, which refuses items once full: item by item, so that the items
    -- before the refusal (BF.ADD's own error) are answered. BF.MADD's reply then holds an
    -- error per refused item, and a Valkey 9 script receives such a reply as one error, the
    -- items it added unanswered.
    added = {}
    for i = 6, #ARGV do
        local one = redis.pcall("BF.ADD", key, ARGV[i])
        if type(one) ~= "number" then
            -- (The words of a full filter, as the client's is_full reads them.)
            local text = string.lower(one.err or "")
            local full = false
            for _, word in ipairs({"full", "max memory", "limit"}) do
                full = full or string.find(text, word, 1, true) ~= nil
            end
            if not full then
                return one
            end
            break
        end
        added[#added + 1] = one
    end
else
    added = redis.call("BF.MADD", key, unpack(ARGV, 6))
end
local flags = {}
local full = false
for i = 1, #ARGV - 5 do
    local v = added[i]
    if full or type(v) ~= "number" then
        full = true
        flags[i] = "F"
    elseif v == 1 then
        flags[i] = "1"
    else
        flags[i] = "0"
    end
end
return table.concat(flags)
