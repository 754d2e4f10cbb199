-- A write by BITFIELD, as a script (for exact answers across retries: once_head.lua): every
-- offset set to 1 (u1) or its counter incremented, saturating (u4), in chunks of at most 1,000
-- offsets per call (Lua's unpack takes at most a few thousand values).
-- KEYS[1]: the bits or counters. KEYS[2] (a native filter of one key): its parameters,
-- stored first when missing (as the guard's step does beside a plain write).
-- ARGV[1]: "set" or "incr". ARGV[2]: k, offsets per item. ARGV[3]: the client's parameters
-- (with KEYS[2]); without KEYS[2], "1" when KEYS[1] must exist already (a shard of a filter
-- whose parameters the client has just seen stored), else "". ARGV[4..]: k bit offsets per
-- item.
-- Reply: one character per item, "1" when it was new (a bit was 0, or a counter was 0, before
-- the write), else "0"; or {"params", STORED} when other parameters are stored, or {"lost",
-- KEY} when the parameters are stored but KEYS[1] is gone (SPEC.md §3: a write never makes a
-- lost filter again): nothing written.
-- Setting bits is idempotent, incrementing is not: only a set that added nothing goes
-- unrecorded (once_head.lua).
if ARGV[1] == "set" then
    once_quiet = {1, 0}
end
local key, argv, k = KEYS[1], ARGV, tonumber(ARGV[2])
if KEYS[2] then
    local stored = redis.call("get", KEYS[2])
    if not stored then
        redis.call("set", KEYS[2], argv[3])
    elseif stored ~= argv[3] then
        return {"params", stored}
    elseif redis.call("exists", key) == 0 then
        return {"lost", key}
    end
elseif argv[3] == "1" and redis.call("exists", key) == 0 then
    return {"lost", key}
end
-- New: a bit that was 0 (its old value), or a counter that was 0 (1 after the increment).
local op, width, new_when, first = "SET", "u1", 0, 0
if argv[1] == "incr" then
    op, width, new_when, first = "INCRBY", "u4", 1, 2
end
-- One table of arguments for every call (OVERFLOW SAT first for increments), and the flags
-- taken from each reply as it comes: no copy of the values (a tenth of the script's time).
local args, flags = {"OVERFLOW", "SAT"}, {}
local item, left, new = 1, k, "0"
local i, total = 4, #argv
while i <= total do
    local last = math.min(total, i + 999)
    local n = first
    for j = i, last do
        args[n + 1], args[n + 2], args[n + 3], args[n + 4] = op, width, argv[j], "1"
        n = n + 4
    end
    for _, v in ipairs(redis.call("bitfield", key, unpack(args, 1, n))) do
        if v == new_when then
            new = "1"
        end
        left = left - 1
        if left == 0 then
            flags[item] = new
            item, left, new = item + 1, k, "0"
        end
    end
    i = last + 1
end
return table.concat(flags)
