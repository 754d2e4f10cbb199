-- Adds items to a growing filter (SPEC.md §4 "growing"), in order, in one atomic step: an item
-- present in any level writes nothing and uses no capacity; a new one goes to the newest level,
-- and when that level has taken its capacity of new items, the next level is made first (so
-- that concurrent clients never make two levels for one fill).
-- KEYS[1]: the levels' counts: a hash, field i = the new items level i took (levels 0..L-1, so
-- its length is the number of levels L). KEYS[2..S+1]: the strings (segments) that hold levels
-- 0..S-1, one per level (levels share segments, so a key repeats; the client names as many
-- levels as it expects the step to need). KEYS[S+2], KEYS[S+3] (a filter of one key): the stored
-- parameters and the bare key, checked when the step makes the first level.
-- ARGV[1]: the parameters. ARGV[2]: the command that reads bits ("bitfield_ro" or "bitfield").
-- ARGV[3]: S. ARGV[4]: the most levels. ARGV[5..4+S]: k of each level. ARGV[5+S..4+2S]: the
-- capacity of each level. ARGV[5+2S..]: per item, the bit offsets (in their segments) in levels 0..S-1, in order
-- (k_0 + ... + k_{S-1} of them, computed by the client: Lua's numbers are exact only to 2^53),
-- as decimal strings, which go to BITFIELD as they are (Redis 7.0 formats a Lua number with
-- "%.17g": measured, a check of 7 levels costs 33 us of server CPU this way, 44 us with the
-- offsets packed in one binary argument and unpacked to numbers).
-- Reply: {L, COUNT, VERIFIED, DONE, FULL, flag_1, ..., flag_DONE}: the levels and the newest
-- one's count after the step; VERIFIED 1 when the parameters are known to be this filter's;
-- DONE the items handled, in order (each flag 1 when new); DONE falls short of the items when
-- an item needed a level past S (the client sends the rest again, naming more levels) or, with
-- FULL 1, past the most levels (that item and the rest: nothing written). {"params", STORED}
-- when the parameters differ ("" when the bare key holds bits without any), {"lost", KEY} when
-- the counts (under stored parameters) or a level's segment are gone: nothing written.
-- (Few calls into Redis: each costs the script about a microsecond.)
local counts, read, s, most = KEYS[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local levels = redis.call("hlen", counts)
local verified = 1
-- The parameters to store when the step makes the first level.
local store = false
if levels == 0 and #KEYS >= s + 3 then
    -- The first level: the step that makes it checks (and stores) the parameters. Later steps
    -- need not: the counts' name holds a hash of the parameters, so counts that exist were made
    -- by a step that checked them.
    local stored = redis.call("get", KEYS[s + 2])
    if stored then
        if stored ~= ARGV[1] then
            return {"params", stored}
        end
        -- Stored with the first level, in the step that made it: the counts are gone
        -- (SPEC.md §3: a write never makes a lost filter again).
        return {"lost", counts}
    elseif redis.call("exists", KEYS[s + 3]) == 1 then
        -- bits of another kind; a key of another type is named, as a plain filter names it.
        local kind = redis.call("type", KEYS[s + 3])["ok"]
        if kind ~= "string" then
            return redis.error_reply("WRONGTYPE the key " .. KEYS[s + 3] .. " holds a " .. kind .. ", not a string")
        end
        return {"params", ""}
    else
        store = true
    end
end
if levels > s then
    return {levels, 0, verified, 0, 0}
end
-- Every segment of the levels the counts name exists (each is made with its level's first
-- item): one that is gone lost its items, which this step would answer "new" (SPEC.md §3).
if levels > 0 then
    local named, seen = {}, {}
    for i = 1, math.min(levels, s) do
        local key = KEYS[1 + i]
        if not seen[key] then
            seen[key] = true
            named[#named + 1] = key
        end
    end
    if #named > 0 and redis.call("exists", unpack(named)) ~= #named then
        for _, key in ipairs(named) do
            if redis.call("exists", key) == 0 then
                return {"lost", key}
            end
        end
    end
end
-- What the step may need after its first write is proven before it: a refusal (the ACL; an
-- unknown BITFIELD_RO before Redis 6.2) stops the script before it writes, not between two
-- items, where the caller, taking it for a step that wrote nothing, would add the items again
-- and answer "seen" for those this one added. The read (of the first level) and the counts'
-- HSET asked of the ACL (lua/acl.lua); and its write, the levels' BITFIELD (proven by a call
-- with no operation where the server cannot say), and the read of the newest count, HGET, so
-- that a refusal of them names them (inside a script Redis 7.0 names no command).
local refused = s > 0 and bitfield_refusal("on the growing filter's levels", read, KEYS[2])
    or s > 0 and bitfield_refusal("on the growing filter's levels", "bitfield", KEYS[2])
    or acl_refusal("on the growing filter's counts", "hset", counts, "0", "0")
    or levels > 0 and acl_refusal("on the growing filter's counts", "hget", counts, "0")
if refused then
    return refused
end
-- Where the server cannot say (Redis 6), the counts' HSET is proven by making the step's first
-- write one (the count as it is, or the new level's 0, which the step writes anyway): refused,
-- the script stops having written nothing. Only a step that writes pays it.
local proven = redis.acl_check_cmd ~= nil
-- Whether the newest level's write tells whether the item was in it without writing when it
-- was: before Redis 7 (no REDIS_VERSION_NUM) a BITFIELD SET that changes no bit is still a
-- write (propagated, signalled), so there the newest level is read first, as a full one is.
local set_reads = redis.REDIS_VERSION_NUM ~= nil
local k, cap, start = {}, {}, {}
local width = 0
for i = 1, s do
    k[i] = tonumber(ARGV[4 + i])
    cap[i] = tonumber(ARGV[4 + s + i])
    start[i] = width
    width = width + k[i]
end
local newest = levels
local count = 0
if newest > 0 then
    count = tonumber(redis.call("hget", counts, newest - 1)) or 0
end
-- The newest level's count as stored: written back only when it changed (an add of items
-- already present writes nothing, SPEC.md §4: no HSET of the same count either, which Redis
-- would propagate and signal as a change).
local stored = count
local out = {levels, 0, verified, 0, 0}
local get, set = {}, {}
local head = 5 + 2 * s
local done = 0
local items = (#ARGV - head + 1) / width
-- The levels full when the step begins (1 .. fixed) take no more bits: which items they hold
-- is read for the whole step first, level by level, newest first, each only for the items not
-- found yet, in calls of at most 1,000 offsets. Of four items or more, a first call reads their
-- first bits and a second the other bits of those whose first bit is set: an absent item's
-- first bit is most often 0, and each offset read costs the script more than the call it goes
-- in. The levels past `fixed`, the newest with room and those the step makes, are read item by
-- item below: the step itself writes them.
local fixed = newest
if newest > 0 and count < cap[newest] then
    fixed = newest - 1
end
-- (A step of one item reads them item by item: as many calls, less to do around them.)
if items == 1 then
    fixed = 0
end
local found = {}
local pending = {}
for item = 1, fixed > 0 and items or 0 do
    pending[item] = item
end
for level = fixed, 1, -1 do
    if #pending == 0 then
        break
    end
    -- (find_sort: lua/find_sort.lua.)
    local hits, rest = {}, {}
    local key, base = KEYS[1 + level], head + start[level]
    if #pending < 4 or k[level] == 1 then
        find_sort(key, read, base, width, pending, 0, k[level], hits, rest)
    else
        local first = {}
        find_sort(key, read, base, width, pending, 0, 1, first, rest)
        find_sort(key, read, base, width, first, 1, k[level] - 1, hits, rest)
    end
    for _, item in ipairs(hits) do
        found[item] = true
    end
    pending = rest
end
for item = 1, items do
    local base = head + (item - 1) * width
    -- Present in any level (those up to `fixed` read above)? While the newest level has room,
    -- the others older than it are read (one call each) and then the newest is set, its old
    -- bits telling whether the item was in it (all 1: it was, and the write changed nothing):
    -- one call less per new item. A full newest level is read first instead, newest first (it
    -- holds the most items), since a new item goes to the next level (and every level is read
    -- first before Redis 7: `set_reads`).
    local room = newest > 0 and count < cap[newest]
    local present = found[item] == true
    local from = (room and set_reads) and newest - 1 or newest
    if present then
        from = fixed
    end
    for level = from, fixed + 1, -1 do
        local at = base + start[level]
        for j = 1, k[level] do
            get[3 * j - 2] = "GET"
            get[3 * j - 1] = "u1"
            get[3 * j] = ARGV[at + j - 1]
        end
        local all = true
        for _, bit in ipairs(redis.call(read, KEYS[1 + level], unpack(get, 1, 3 * k[level]))) do
            if bit == 0 then
                all = false
                break
            end
        end
        if all then
            present = true
            break
        end
    end
    if not present then
        if not room then
            if newest >= most then
                out[5] = 1
                break
            end
            if newest >= s then
                break
            end
            -- A level key holding something else: refused before anything is written for
            -- this item (Redis does not undo a script's writes when it fails).
            local kind = redis.call("type", KEYS[2 + newest]).ok
            if kind ~= "none" and kind ~= "string" then
                return redis.error_reply("WRONGTYPE Operation against a key holding the wrong kind of value")
            end
            if not proven then
                redis.call("hset", counts, newest, 0)
                proven = true
            end
            if store then
                redis.call("set", KEYS[s + 2], ARGV[1])
                store = false
            end
            if newest > 0 and count ~= stored then
                redis.call("hset", counts, newest - 1, count)
            end
            newest = newest + 1
            count, stored = 0, 0
            redis.call("hset", counts, newest - 1, 0)
            -- A filter given a TTL (expire) keeps it for its new levels.
            local ttl = redis.call("pttl", counts)
            if ttl > 0 then
                redis.call("set", KEYS[1 + newest], "", "PX", ttl, "NX")
            end
        end
        local at = base + start[newest]
        for j = 0, k[newest] - 1 do
            set[4 * j + 1] = "SET"
            set[4 * j + 2] = "u1"
            set[4 * j + 3] = ARGV[at + j]
            set[4 * j + 4] = "1"
        end
        if not proven then
            redis.call("hset", counts, newest - 1, count)
            proven = true
        end
        local new = false
        local old = redis.call("bitfield", KEYS[1 + newest], unpack(set, 1, 4 * k[newest]))
        for _, bit in ipairs(old) do
            if bit == 0 then
                new = true
                break
            end
        end
        -- Found in the newest level by its write where it had room; an item that a level was
        -- just made for is new whatever its old bits, as it was when the level was read first.
        if new or not room then
            count = count + 1
        else
            present = true
        end
    end
    done = done + 1
    out[5 + done] = present and 0 or 1
end
if newest > 0 and count ~= stored then
    redis.call("hset", counts, newest - 1, count)
end
out[1], out[2], out[4] = newest, count, done
return out
