-- ORs one range of an import's file into a filter's key (`import --merge`, SPEC.md §5), so that
-- no step holds the server longer than one range's copy, whatever the key's size (the knob:
-- Builder::merge_chunk_bytes, the CLI's --merge-chunk). The importer has staged the range in
-- a key of its own (lua/import_swap.lua has checked the keys' types and the parameters).
-- KEYS[1]: the filter's key. KEYS[2]: the range's staged piece: the file's bytes ARGV[1] ..
-- ARGV[1] + its length - 1. KEYS[3]: the import's scratch key.
-- ARGV[1]: the piece's first byte. ARGV[2]: the file's length of this key: a shorter key grows
-- to it (as BITOP OR of the whole key leaves the longer length), in one step, the first.
-- ARGV[3]: the TTL in ms of a key this step makes (-1: none; below -1: the negated moment, in
-- ms, it expires at); a key that exists keeps its own.
-- ARGV[4]: "1" when the piece must be there, "0" for a step that only grows the key (a file
-- whose bytes of this key are all zeros).
-- Reply: 1; {"staged", KEYS[2]} when the piece is gone (its TTL ran out), nothing written.
--
-- Only native commands compute on the bytes: GETRANGE of the key's bytes under the piece, SET
-- of them into the scratch key, BITOP OR of the piece into it, GET. The writes to the key come
-- last (SETRANGE keeps its TTL), after the piece and the scratch key are gone: a refusal (ACL)
-- or an error before them writes nothing to it.
local first, length, ttl = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local merged = false
if ARGV[4] == "1" then
    local size = redis.call("strlen", KEYS[2])
    if size == 0 then
        return {"staged", KEYS[2]}
    end
    local old = redis.call("getrange", KEYS[1], first, first + size - 1)
    redis.call("set", KEYS[3], old, "px", 60000)
    redis.call("bitop", "or", KEYS[3], KEYS[3], KEYS[2])
    merged = redis.call("get", KEYS[3])
    redis.call("del", KEYS[2], KEYS[3])
end
local made = redis.call("exists", KEYS[1]) == 0
-- The TTL of a key this step makes is set after its first write: asked of the ACL before it
-- (Redis keeps a failed script's writes: refused after, the key would stay without its TTL).
-- (lua/acl.lua)
local expire = nil
if made and ttl > 0 then
    expire = {"pexpire", KEYS[1], ttl}
elseif made and ttl < -1 then
    expire = {"pexpireat", KEYS[1], -ttl}
end
local refused = expire and plan_refusal("the import needs", KEYS[3], {expire})
if refused then
    return refused
end
if redis.call("strlen", KEYS[1]) < length then
    redis.call("setrange", KEYS[1], length - 1, "\0")
end
if merged then
    redis.call("setrange", KEYS[1], first, merged)
end
if expire then
    redis.call(unpack(expire))
end
return 1
