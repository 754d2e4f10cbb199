-- A write by BITFIELD, as a script (for exact answers across retries: once_head.lua): every
-- offset set to 1 (u1) or its counter incremented, saturating (u4), in chunks of at most 1,000
-- offsets per call (Lua's unpack takes at most a few thousand values).
-- KEYS[1]: the bits or counters. ARGV[1]: "set" or "incr". ARGV[2..]: bit offsets.
-- Reply: what BITFIELD replies: one integer per offset, the value before (set) or after (incr).
local key, incr = KEYS[1], ARGV[1] == "incr"
local out, args = {}, {}
local i = 2
while i <= #ARGV do
    local n = 0
    if incr then
        args[1], args[2] = "OVERFLOW", "SAT"
        n = 2
    end
    local last = math.min(#ARGV, i + 999)
    for j = i, last do
        if incr then
            args[n + 1], args[n + 2], args[n + 3], args[n + 4] = "INCRBY", "u4", ARGV[j], 1
        else
            args[n + 1], args[n + 2], args[n + 3], args[n + 4] = "SET", "u1", ARGV[j], 1
        end
        n = n + 4
    end
    local reply = redis.call("bitfield", key, unpack(args, 1, n))
    for _, v in ipairs(reply) do
        out[#out + 1] = v
    end
    i = last + 1
end
return out
