end
-- Exact answers across retries, part 3 of 3 (see once_head.lua).
-- A step recorded in its slot replies what it replied then, and applies nothing again. A
-- record is the reply: "s" and a string (a dense step's bytes from before, a batch's flags),
-- or "j" and an array of integers as JSON.
-- The record's commands, this read first, are asked of the ACL before they run (Redis 7,
-- Valkey; on Redis 6 they are proven before a filter's first recorded write, once_probe.lua):
-- a refusal names them "on the record of exact answers", so that the client tells it from a
-- refusal of the step's own work and writes without records only for the first.
local refused_read = acl_refusal("on the record of exact answers", "hget", once_ring, once_step)
if refused_read then
    return refused_read
end
-- A record or a slot that this script did not write (garbage in the slot's hash) is
-- unreadable: a retry's outcome is then unknown (never a guessed answer, never a Lua error).
local function unreadable(what)
    return redis.error_reply("OUTCOMEUNKNOWN a retried write's record is unreadable (" .. what .. ")")
end
local done = redis.call("hget", once_ring, once_step)
if done then
    local kind = string.sub(done, 1, 1)
    if kind == "s" then
        return string.sub(done, 2)
    end
    local ok, decoded = pcall(cjson.decode, string.sub(done, 2))
    if kind ~= "j" or not ok or type(decoded) ~= "table" then
        return unreadable("its reply")
    end
    return decoded
end
-- A slot is only ever reset to a later epoch. A retry that finds its slot at a later epoch
-- than its own may have been applied and its record dropped: its outcome is unknown, and it
-- applies nothing. A first attempt there is recorded in that later epoch, kept as long.
local epoch = tonumber(redis.call("hget", once_ring, "e") or "-1")
if epoch == nil then
    if once_retry then
        return unreadable("its slot's epoch")
    end
    -- A first attempt starts the slot again (below: an earlier epoch than its own).
    epoch = -1
end
if epoch > once_epoch and once_retry then
    return redis.error_reply("OUTCOMEUNKNOWN a retried write's record could be gone")
end
-- The record's commands are asked of the ACL before the step writes: refused after the write,
-- they would fail the call with the write applied and unrecorded, and the caller, taking the
-- refusal for one that wrote nothing, would write again without a record and answer "seen"
-- for what this step added (lua/acl.lua).
if redis.acl_check_cmd then
    local record = {{"hset", once_ring, once_step, "x"}}
    if epoch < once_epoch then
        record[2] = {"unlink", once_ring}
        if once_ttl and redis.call("pttl", KEYS[1]) > 0 then
            record[3] = {"pexpire", once_ring, "1"}
        end
    end
    for _, command in ipairs(record) do
        local refused = acl_refusal("on the record of exact answers", unpack(command))
        if refused then
            return refused
        end
    end
end
local reply = apply()
if once_answer ~= "" and reply == 1 then
    reply = once_answer
end
-- A refusal ({"params", STORED}, an error) wrote nothing: nothing to record, no slot made.
if type(reply) == "table" and (reply.err or reply.ok or type(reply[1]) == "string") then
    return reply
end
-- A quiet step (once_quiet, see the head) that set no flag (added or removed nothing) is not
-- recorded: a retry of it applies it again and answers as a fresh call would, "seen" for every
-- item still there ("new" only for one the filter lost meanwhile, a clear; a remove or an
-- add-if-absent applied once, at the retry). So adds of items already present write no record
-- (SPEC.md §4: such an add writes nothing).
if once_quiet then
    local new = false
    if type(reply) == "string" then
        new = string.find(reply, "1", 1, true) ~= nil
    elseif type(reply) == "number" then
        new = reply ~= 0
    else
        for i = once_quiet[1], #reply - once_quiet[2] do
            if reply[i] ~= 0 then
                new = true
                break
            end
        end
    end
    if not new then
        return reply
    end
end
local record
if type(reply) == "string" then
    record = "s" .. reply
else
    record = "j" .. cjson.encode(reply)
end
if epoch < once_epoch then
    -- The slot's older records go; a filter whose key has a TTL (after expire) gives the new
    -- slot the same: its records go with it.
    redis.call("unlink", once_ring)
    redis.call("hset", once_ring, "e", once_epoch, once_step, record)
    if once_ttl then
        local ttl = redis.call("pttl", KEYS[1])
        if ttl > 0 then
            redis.call("pexpire", once_ring, ttl)
        end
    end
else
    redis.call("hset", once_ring, once_step, record)
end
return reply
