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
-- bitfield_refusal(ON, COMMAND, KEY): the same for COMMAND (BITFIELD_RO, or BITFIELD: a read,
-- or a write, since the ACL refuses the command whatever its operations) on KEY; where the
-- server cannot say, the command is proven by running it with no operation, which reads and
-- writes nothing (a refusal, or before Redis 6.2 an unknown BITFIELD_RO, fails the script
-- there, before it writes).
local function bitfield_refusal(on, command, key)
    if not redis.acl_check_cmd then
        redis.call(command, key)
        return nil
    end
    return acl_refusal(on, command, key, "GET", "u1", "0")
end
-- plan_refusal(ON, PROBE, CALLS): acl_refusal for each of CALLS (each a command and its
-- arguments, as the script will run it after its first write). Where the server cannot say,
-- each command is proven instead by running it once on PROBE, a key of the script's slot that
-- holds nothing, in place of every key of the script it names, without replication or AOF
-- (set_repl), PROBE deleted after (what it proves is the command, not the keys' patterns: a
-- refusal of PROBE's own key is not taken for one); a command the server does not know is
-- refused too, with its unknown-command error.
local function plan_refusal(on, probe, calls)
    if redis.acl_check_cmd then
        for _, call in ipairs(calls) do
            local refused = acl_refusal(on, unpack(call))
            if refused then
                return refused
            end
        end
        return nil
    end
    local named, done, refused = {}, {}, nil
    for _, key in ipairs(KEYS) do
        named[key] = true
    end
    redis.set_repl(redis.REPL_NONE)
    for _, call in ipairs(calls) do
        local command = string.lower(call[1])
        if not done[command] then
            done[command] = true
            local args = {}
            for i, arg in ipairs(call) do
                args[i] = (i > 1 and named[arg]) and probe or arg
            end
            -- (Other errors, RENAME's "no such key", prove the command was let through.)
            local reply = redis.pcall(unpack(args))
            redis.pcall("del", probe)
            local text = type(reply) == "table" and reply.err or ""
            -- A command the server lacks (a module's, without the module) fails the step here,
            -- before its first write, in the words the client knows.
            if string.find(string.lower(text), "unknown redis command", 1, true) then
                refused = redis.error_reply("ERR Unknown Redis command called from a script: '"
                    .. call[1] .. "'")
                break
            end
            -- (A refusal of the probe's key says nothing of the real keys: only the command's
            -- refusal counts.)
            if string.find(text, "can't run this command", 1, true)
                or (string.find(text, "NOPERM", 1, true) and string.find(text, "to run", 1, true)) then
                refused = redis.error_reply("NOPERM this user has no permissions to run the '"
                    .. call[1] .. "' command " .. on)
                break
            end
        end
    end
    redis.set_repl(redis.REPL_ALL)
    return refused
end
