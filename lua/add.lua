-- Adds one item: go-zero's set script (core/bloom), which SETBITs every offset in ARGV in order,
-- plus a reply: 1 when at least one bit flipped from 0 to 1 (the item was certainly new), else 0.
-- KEYS[1]: the filter's key. ARGV: the item's bit offsets as decimal strings.
local new = 0
for _, offset in ipairs(ARGV) do
    if redis.call("setbit", KEYS[1], offset, 1) == 0 then
        new = 1
    end
end
return new
