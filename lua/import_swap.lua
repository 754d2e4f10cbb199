-- Puts an import's staged keys in place (SPEC.md §5 "import"), in one atomic step per slot
-- group: other clients see the old filter or the new one, never a mix. Nothing is written
-- unless every check passes. A merge ("merge") ORs each staging key into the filter's; a merge
-- by ranges ("check") only checks and stores the parameters: the file's bits are then ORed in
-- range by range (lua/import_merge.lua).
-- KEYS[1..N]: the filter's keys to replace (or merge into). KEYS[N+1..2N]: their staging keys,
-- written by the importer with a TTL (a staging key of a section of 0 bytes may be missing; a
-- merge by ranges stages pieces, checked by the importer, and not read here).
-- KEYS[2N+1..2N+E]: keys of the filter the file does not have (levels past its own): deleted
-- by a replace. KEYS[2N+E+1], KEYS[2N+E+2] (optional): the stored parameters and the key whose
-- bits show a filter without parameters.
-- ARGV[1]: N. ARGV[2]: "replace", "merge" or "check". ARGV[3]: the parameters ("" when the
-- filter keeps none). ARGV[4]: E. ARGV[5..N+4]: each section's length in bytes. ARGV[N+5..2N+4]: each
-- section's TTL in ms (-1: none; below -1: the negated moment, in ms, it expires at).
-- ARGV[2N+5..3N+4]: the type each key may hold besides none
-- ("string" or "hash"). ARGV[3N+5]: the type the keys of E may hold besides none and a string
-- (a window's generations of module filters, beside its ledger string).
-- Reply: 1 when done; {"params", STORED} when the keys hold a filter with other parameters
-- ("" when bits without any); {"staged", KEY} when a staging key is gone (expired: the import
-- took longer than its TTL); a WRONGTYPE error when a key holds something other than a string.
local n, mode, params, e = tonumber(ARGV[1]), ARGV[2], ARGV[3], tonumber(ARGV[4])
local p = 2 * n + e + 1
for i = 1, n do
    local len = tonumber(ARGV[4 + i])
    if mode ~= "check" and len > 0 and redis.call("exists", KEYS[n + i]) == 0 then
        return {"staged", KEYS[n + i]}
    end
    local kind = redis.call("type", KEYS[i]).ok
    if kind ~= "none" and kind ~= ARGV[4 + 2 * n + i] then
        return redis.error_reply("WRONGTYPE Operation against a key holding the wrong kind of value")
    end
end
for i = 1, e do
    local kind = redis.call("type", KEYS[2 * n + i]).ok
    if kind ~= "none" and kind ~= "string" and kind ~= ARGV[5 + 3 * n] then
        return redis.error_reply("WRONGTYPE Operation against a key holding the wrong kind of value")
    end
end
if #KEYS >= p + 1 and params ~= "" then
    local stored = redis.call("get", KEYS[p])
    if stored then
        if stored ~= params then
            return {"params", stored}
        end
    elseif redis.call("exists", KEYS[p + 1]) == 1 then
        return {"params", ""}
    end
end
if mode == "check" then
    if #KEYS >= p and params ~= "" then
        redis.call("set", KEYS[p], params)
    end
    return 1
end
-- The writes, planned first and each asked of the ACL before the first is made: Redis keeps a
-- failed script's writes, so a refusal half-way (a user without PEXPIRE, RENAME, PERSIST, DEL)
-- would leave some keys replaced and others not, or a key without its TTL, which other
-- clients must never see. (lua/acl.lua)
local plan = {}
local function later(...)
    plan[#plan + 1] = {...}
end
-- A key's TTL, in ms from now (ttl > 0) or the moment it ends (ttl < -1); none otherwise.
local function expire_later(key, ttl)
    if ttl > 0 then
        later("pexpire", key, ttl)
    elseif ttl < -1 then
        later("pexpireat", key, -ttl)
    end
end
for i = 1, n do
    local target, staged = KEYS[i], KEYS[n + i]
    local len, ttl = tonumber(ARGV[4 + i]), tonumber(ARGV[4 + n + i])
    if mode == "merge" then
        if len > 0 then
            -- BITOP replaces its destination, TTL included: the filter keeps its own (or, new,
            -- takes the file's).
            local keep = redis.call("pttl", target)
            later("bitop", "or", target, target, staged)
            if keep > 0 then
                later("pexpire", target, keep)
            elseif keep == -2 then
                expire_later(target, ttl)
            end
        end
    elseif len > 0 then
        later("rename", staged, target)
        if ttl > 0 or ttl < -1 then
            expire_later(target, ttl)
        else
            later("persist", target)
        end
    elseif ARGV[4 + 2 * n + i] == "string" then
        -- An empty section: the key made empty, not deleted (a part exists whenever the
        -- filter's parameters do: SPEC.md §3).
        later("set", target, "")
        expire_later(target, ttl)
    else
        later("del", target)
    end
    later("del", staged)
end
if mode ~= "merge" then
    for i = 1, e do
        later("del", KEYS[2 * n + i])
    end
end
if #KEYS >= p and params ~= "" then
    later("set", KEYS[p], params)
end
-- (The probe where the server cannot ask: a key of this slot beside the first staging key.)
local refused = plan_refusal("the import needs", KEYS[n + 1] .. ":probe", plan)
if refused then
    return refused
end
for _, call in ipairs(plan) do
    redis.call(unpack(call))
end
return 1
