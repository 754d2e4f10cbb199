-- Adds items to the current generation; new = in no live generation before. One atomic step:
-- lua/window_args.lua, lua/window_epoch.lua, this, lua/window_check.lua, lua/window_create.lua,
-- lua/window_find.lua, lua/window_add.lua.
-- ARGV[7]: k. ARGV[8..]: k bit offsets per item.
-- Reply: one integer per item, then `verified` (see the head); per item 1 when new, else 0.
-- (Few calls into Redis, a few per step rather than per item: each costs the script about a
-- microsecond.)
local read, k = ARGV[6], tonumber(ARGV[7])
local current = live[1]
-- The older generations are read after the step's first write (lua/window_add.lua): their
-- read is asked of the ACL first (`redis.acl_check_cmd`, Redis 7 and Valkey), or proven with
-- no operation on the first of them (before Redis 6.2 BITFIELD_RO is unknown), so that a
-- refusal stops the script before it writes (the caller, taking it for a step that wrote
-- nothing, would add the items again and answer "seen" for those this one added).
if g >= 2 then
    if not redis.acl_check_cmd then
        redis.call(read, live[2])
    elseif not redis.acl_check_cmd(read, live[2], "GET", "u1", "0") then
        return redis.error_reply("NOPERM this user has no permissions to run the '" .. read
            .. "' command on the older generations")
    end
end
-- The parameters are checked when this step creates the generation; one that exists was
-- created by a step that checked them (its name holds their hash), so they are this filter's.
local fresh = redis.call("exists", current) == 0
check = fresh
if not fresh then
    verified = 1
end
