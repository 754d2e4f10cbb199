-- A write by BITFIELD, as a script (for exact answers across retries: once_head.lua): every
-- offset set to 1 (u1) or its counter incremented, saturating (u4), in chunks of at most 1,000
-- offsets per call (Lua's unpack takes at most a few thousand values).
-- KEYS[1]: the bits or counters. KEYS[2] (a native filter of one key): its parameters,
-- stored first when missing (SET NX GET, as the guard's step does beside a plain write).
-- ARGV[1]: "set" or "incr". ARGV[2]: k, offsets per item. ARGV[3]: the client's parameters
-- ("" without KEYS[2]). ARGV[4..]: k bit offsets per item.
-- Reply: one character per item, "1" when it was new (a bit was 0, or a counter was 0, before
-- the write), else "0"; or {"params", STORED} when other parameters are stored: nothing written.
local key, incr, k = KEYS[1], ARGV[1] == "incr", tonumber(ARGV[2])
if KEYS[2] then
    local stored = redis.call("set", KEYS[2], ARGV[3], "NX", "GET")
    if stored and stored ~= ARGV[3] then
        return {"params", stored}
    end
end
local values, args = {}, {}
local i = 4
while i <= #ARGV do
    local n = 0
    if incr then
        args[1], args[2] = "OVERFLOW", "SAT"
        n = 2
    end
    local last = math.min(#ARGV, i + 999)
    for j = i, last do
        if incr then
            args[n + 1], args[n + 2], args[n + 3], args[n + 4] = "INCRBY", "u4", ARGV[j], "1"
        else
            args[n + 1], args[n + 2], args[n + 3], args[n + 4] = "SET", "u1", ARGV[j], "1"
        end
        n = n + 4
    end
    local reply = redis.call("bitfield", key, unpack(args, 1, n))
    for _, v in ipairs(reply) do
        values[#values + 1] = v
    end
    i = last + 1
end
-- New: a bit that was 0 (its old value), or a counter that was 0 (1 after the increment).
local new_when = incr and 1 or 0
local flags = {}
for item = 1, #values / k do
    local new = "0"
    for j = (item - 1) * k + 1, item * k do
        if values[j] == new_when then
            new = "1"
        end
    end
    flags[item] = new
end
return table.concat(flags)
