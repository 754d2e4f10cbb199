-- The growing filter's dense add: ORs the bits a client computed for a batch into the segments
-- (the strings that hold the levels) and sets the levels' counts, unless the counts changed since the client read them with the levels
-- (a compare-and-set: every add that sets bits changes the counts, so unchanged counts mean
-- unchanged levels, and the client's "new" answers and its level fills are exact). Runs in a
-- MULTI after the SETs of the scratch keys.
-- KEYS[1]: the counts. KEYS[2..T+1]: the segments the batch touches. KEYS[T+2..2T+1]: their
-- scratch keys (the bits to OR in; with a TTL; deleted here whatever happens). KEYS[2T+2],
-- KEYS[2T+3] (a filter of one key): the stored parameters and the bare key.
-- ARGV[1]: the parameters. ARGV[2]: T. ARGV[3]: the counts as read ("i=n,..." by level, "" for
-- none). ARGV[4]: C. ARGV[5..C+4]: each level whose count changed. ARGV[C+5..2C+4]: its count
-- after the batch.
-- Reply: 1 when merged; 0 when the counts changed since (nothing written); {"params", STORED};
-- {"lost", COUNTS} when the parameters are stored but the counts are gone (SPEC.md §3: a write
-- never makes a lost filter again; nothing written).
local counts, t, c = KEYS[1], tonumber(ARGV[2]), tonumber(ARGV[4])
local scratch = {}
for i = 1, t do
    scratch[i] = KEYS[1 + t + i]
end
local function drop()
    if t > 0 then
        redis.call("del", unpack(scratch))
    end
end
-- A pcall's refusal, replied before anything is written (the scratch keys gone); nil when
-- `reply` is none.
local function refusal(reply)
    if type(reply) == "table" and reply.err then
        drop()
        return reply
    end
    return nil
end
local now = redis.call("hgetall", counts)
local seen = {}
for i = 1, #now, 2 do
    seen[#seen + 1] = {tonumber(now[i]), now[i + 1]}
end
table.sort(seen, function(a, b) return a[1] < b[1] end)
local parts = {}
for i, pair in ipairs(seen) do
    parts[i] = pair[1] .. "=" .. pair[2]
end
if table.concat(parts, ",") ~= ARGV[3] then
    drop()
    return 0
end
local store = false
if #seen == 0 and #KEYS >= 2 * t + 3 then
    local stored = redis.call("get", KEYS[2 * t + 2])
    if stored then
        if stored ~= ARGV[1] then
            drop()
            return {"params", stored}
        end
        -- Stored with the first level, by the step that made it: the counts are gone.
        drop()
        return {"lost", counts}
    elseif redis.call("exists", KEYS[2 * t + 3]) == 1 then
        drop()
        return {"params", ""}
    else
        store = true
    end
end
-- BITOP proven first (the ACL may refuse it: the batch then goes by the per-item script),
-- before anything is written: asked of the ACL where the server can say (Redis 7, Valkey; a
-- refusal of the scratch keys' pattern too), else run on a scratch key. That run passes over
-- the scratch key's bytes, as long as the segment's: half of the merge's BITOP time when
-- every server ran it (two BITOPs a merge into a 7.9 MB level, 6.9 ms each, median).
local refused = nil
if t > 0 and redis.acl_check_cmd then
    refused = acl_refusal("on the growing filter's levels", "bitop", "or", KEYS[2], KEYS[2],
        scratch[1])
    if refused then
        drop()
    end
elseif t > 0 then
    refused = refusal(redis.pcall("bitop", "or", scratch[1], scratch[1]))
end
if refused then
    return refused
end
-- A segment key holding something else: refused before anything is written.
for i = 1, t do
    local kind = redis.call("type", KEYS[1 + i]).ok
    if kind ~= "none" and kind ~= "string" then
        drop()
        return redis.error_reply("WRONGTYPE Operation against a key holding the wrong kind of value")
    end
end
if store then
    redis.call("set", KEYS[2 * t + 2], ARGV[1])
end
-- BITOP replaces its destination, TTL included: each segment keeps its own, and a new one
-- takes the filter's (the counts').
local filter_ttl = redis.call("pttl", counts)
local ttls, expiring = {}, false
for i = 1, t do
    local ttl = redis.call("pttl", KEYS[1 + i])
    if ttl == -2 then
        ttl = filter_ttl
    end
    ttls[i] = ttl
    expiring = expiring or ttl > 0
end
-- PEXPIRE proven on a scratch key too, and the counts written before the bits: a refusal of
-- either comes before the segments change (the batch then fails whole, its items not added).
refused = expiring and refusal(redis.pcall("pexpire", scratch[1], 60000))
if refused then
    return refused
end
for i = 1, c do
    refused = refusal(redis.pcall("hset", counts, ARGV[4 + i], ARGV[4 + c + i]))
    if refused then
        return refused
    end
end
for i = 1, t do
    local segment = KEYS[1 + i]
    redis.call("bitop", "or", segment, segment, scratch[i])
    if ttls[i] > 0 then
        redis.call("pexpire", segment, ttls[i])
    end
end
-- After the writes: a refusal here must not fail a merge that went through (the scratch keys
-- have a TTL).
if t > 0 then
    redis.pcall("del", unpack(scratch))
end
return 1
