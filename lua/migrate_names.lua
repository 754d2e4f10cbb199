-- Moves one slot group of a filter made by an earlier build from the older companion names
-- (`{K}:redbloom:NAME`, src/keys.rs legacy_sidecar) to today's (`{TAG}:redbloom:LEN:K:NAME`,
-- src/keys.rs sidecar), in one atomic step: every key of the group is found by SCAN (they all
-- share the older prefix and the slot), the kept ones renamed with their TTL (parameters,
-- generations and their ledger, growing levels), the passing ones deleted (records, scratch,
-- swap, staging, leases: they belong to writes in flight of the earlier build). The parameters
-- move last, so that they name a filter whose other keys are in place.
-- KEYS[1]: the older parameters key of the group (or, for a shard, any key of its slot).
-- KEYS[2]: today's parameters key of the group (or KEYS[1] again for a shard).
-- ARGV[1]: the SCAN pattern of the older prefix (its glob characters escaped).
-- ARGV[2]: the older prefix. ARGV[3]: today's prefix.
-- Reply: {renamed, deleted}.
local old, new = ARGV[2], ARGV[3]
local found, cursor = {}, "0"
repeat
    local reply = redis.call("scan", cursor, "match", ARGV[1], "count", 1000)
    cursor = reply[1]
    for _, key in ipairs(reply[2]) do
        found[#found + 1] = key
    end
until cursor == "0"
local renamed, deleted, params = 0, 0, nil
for _, key in ipairs(found) do
    local name = string.sub(key, #old + 1)
    -- Today's names carry the key's length after the prefix: a digit, which no older name has.
    if string.sub(key, 1, #old) == old and not string.find(name, "^%d") then
        if name == "params" then
            params = key
        elseif string.find(name, "once:", 1, true) or string.find(name, "^scratch")
            or string.find(name, "^swap:") or string.find(name, "^import:") then
            redis.call("del", key)
            deleted = deleted + 1
        elseif string.find(name, "^gen:") or string.find(name, "^made:") or string.find(name, "^grow:") then
            redis.call("rename", key, new .. name)
            renamed = renamed + 1
        end
    end
end
if params and KEYS[2] ~= KEYS[1] then
    redis.call("rename", params, KEYS[2])
    renamed = renamed + 1
end
return {renamed, deleted}
