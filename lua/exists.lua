-- Checks one item: go-zero's test script (core/bloom), verbatim.
-- KEYS[1]: the filter's key. ARGV: the item's bit offsets as decimal strings.
-- Reply: Lua true (integer 1) when every bit is set, Lua false (nil) at the first 0 bit.
for _, offset in ipairs(ARGV) do
    if tonumber(redis.call("getbit", KEYS[1], offset)) == 0 then
        return false
    end
end
return true
