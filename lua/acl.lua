-- Refusals met before the first write (docs/security.md): Redis keeps a failed script's writes,
-- so a script asks the ACL for each command it runs after its first write before it writes
-- (the caller, taking a refusal for a step that wrote nothing, would write again by another
-- path and answer "seen" for what this one added). A part of every script that needs it (the
-- recorded ones get it from `once_lua!`).
-- acl_refusal(ON, COMMAND, ARG...): a NOPERM error reply naming COMMAND and ON (what it runs
-- on, as the user would say it) when this user may not run COMMAND ARG..., else nil; nil where
-- the server cannot say (`redis.acl_check_cmd`: Redis 7 and Valkey; Redis 6 lacks it).
local function acl_refusal(on, command, ...)
    if redis.acl_check_cmd and not redis.acl_check_cmd(command, ...) then
        return redis.error_reply("NOPERM this user has no permissions to run the '" .. command
            .. "' command " .. on)
    end
end
-- read_refusal(ON, READ, KEY): the same for a read of KEY (BITFIELD_RO, or BITFIELD); where
-- the server cannot say, the read is proven by running it with no operation (before Redis 6.2
-- BITFIELD_RO is unknown: the call fails the script before it writes).
local function read_refusal(on, read, key)
    if not redis.acl_check_cmd then
        redis.call(read, key)
        return nil
    end
    return acl_refusal(on, read, key, "GET", "u1", "0")
end
