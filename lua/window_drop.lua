-- Deletes a window filter's generations and parameters (clear) or gives them a TTL (expire),
-- after the head's checks, in one atomic step. A generation that would leave the window sooner
-- keeps its own expiry.
-- ARGV[7]: "del" or "pexpire". ARGV[8]: the TTL in milliseconds (for "pexpire").
-- A generation key of another type than string gets a WRONGTYPE error naming the type, and
-- nothing is touched; then lua/window_drop_keys.lua.
for i = 1, g + 2 do
    local kind = redis.call("type", KEYS[i])["ok"]
    if kind ~= "string" and kind ~= "none" then
        return redis.error_reply("WRONGTYPE the key " .. KEYS[i] .. " holds a " .. kind ..
            ", not a string")
    end
end
