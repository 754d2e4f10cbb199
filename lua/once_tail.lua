end
-- Exact answers across retries, part 3 of 3 (see once_head.lua).
-- A step recorded in the ring replies what it replied then, and applies nothing again. A
-- record is the reply: "s" and a string (a dense step's bytes from before, a batch's flags),
-- or "j" and an array of integers as JSON.
-- The record's commands, these reads first, are asked of the ACL before they run (Redis 7,
-- Valkey; on Redis 6 they are proven before a filter's first recorded write, once_probe.lua):
-- a refusal names them "on the record of exact answers", so that the client tells it from a
-- refusal of the step's own work and writes without records only for the first.
local once_on = "on the record of exact answers"
local refused_read = acl_refusal(once_on, "time")
    or acl_refusal(once_on, "hget", once_rings[1], once_step)
    or acl_refusal(once_on, "hmget", once_rings[1], "e")
    or acl_refusal(once_on, "exists", once_rings[1])
if refused_read then
    return refused_read
end
-- The server's clock decides: the epoch is its time over the ring's width, and a record goes
-- in the slot of its epoch.
local once_time = redis.call("time")
local once_now = tonumber(once_time[1]) * 1000 + math.floor(tonumber(once_time[2]) / 1000)
local once_epoch = math.floor(once_now / once_width)
local function once_slot(epoch)
    return once_rings[epoch % once_slots + 1]
end
-- A retry's outcome is unknown when its record could be gone (never a guessed answer, never a
-- Lua error): the error names the step and why.
local function unknown(why)
    return redis.error_reply("OUTCOMEUNKNOWN step " .. once_step .. ": " .. why)
end
-- A retry that cannot prove its first attempt absent yet, where that attempt may still be on
-- its way (sent on a connection the client has since replaced, and held up with this one):
-- the client asks again until its retry budget is spent, then the outcome is unknown.
local function pending(why)
    return redis.error_reply("OUTCOMEUNKNOWN pending: step " .. once_step .. ": " .. why)
end
local done
if once_retry then
    for i = 1, once_slots do
        done = redis.call("hget", once_rings[i], once_step)
        if done then
            break
        end
    end
else
    -- A first attempt that arrives after a retry of it (on another connection) finds the
    -- retry's record, written this epoch or the last.
    done = redis.call("hget", once_slot(once_epoch), once_step)
        or redis.call("hget", once_slot(once_epoch - 1), once_step)
end
if done then
    local kind = string.sub(done, 1, 1)
    if kind == "s" then
        return string.sub(done, 2)
    end
    local ok, decoded = pcall(cjson.decode, string.sub(done, 2))
    if kind ~= "j" or not ok or type(decoded) ~= "table" then
        return unknown("its record is unreadable")
    end
    return decoded
end
-- A retry that finds no record was not applied before, or its record is gone: it applies only
-- when every slot its first attempt could have recorded in (the epochs from its sending to
-- now) proves the first: a slot of that epoch that lived since before the attempt could
-- arrive, or a slot still of an older epoch (never started since). A slot gone, started again
-- since, of a later epoch, or unreadable, could have held the record.
if once_retry then
    if not once_floor or once_floor <= 0 then
        return unknown("the time of its first attempt is unknown")
    end
    local first = math.floor(once_floor / once_width)
    if once_epoch - first >= once_slots - 2 then
        return unknown("its first attempt is older than its ring keeps records")
    end
    -- No slot at all: the ring was never made (the first attempt, still on its way, would
    -- make it) or was deleted whole.
    if redis.call("exists", unpack(once_rings)) == 0 then
        return pending("the ring of its first attempt is gone or not made yet")
    end
    for epoch = first, once_epoch do
        local slot = redis.call("hmget", once_slot(epoch), "e", "t", "q")
        if not slot[1] then
            return unknown("the ring slot of its first attempt is gone")
        end
        local started, at = tonumber(slot[1]), tonumber(slot[2])
        if not started or not at then
            return unknown("the ring slot of its first attempt is unreadable")
        end
        if started > epoch then
            return unknown("the ring slot of its first attempt has moved on")
        end
        -- A slot started in its own epoch after the sending: the first attempt could have
        -- recorded in it before, and the slot then been evicted and made again, unless its
        -- start proved its epoch had no recorded write before it ("q", see below) and the
        -- server evicts no key with a TTL (the ring's slots have one).
        if started == epoch and at > math.max(once_floor, epoch * once_width)
            and not (once_kept and slot[3] == "1") then
            return pending("the ring slot of its first attempt started after it was sent")
        end
    end
end
-- The slot of this epoch, and whether it and the next must start (reset to this epoch, or
-- the next: their older records go). A slot starts one epoch early, so that a retry finds it
-- already there when its epoch begins (see above).
local slot = once_slot(once_epoch)
local next_slot = once_slot(once_epoch + 1)
local state = redis.call("hmget", slot, "e", "n")
local started = tonumber(state[1])
local start = started == nil or started < once_epoch
local start_next = start or state[2] == false
-- A slot that starts in its own epoch (after a quiet spell, or in a new ring) proves that no
-- recorded write of its epoch came before it ("q" = "1") when no such write left a trace: the
-- first recorded write of an epoch starts the next slot, and one of the epoch before would have
-- started this one (and marked its own "n"). So a retry whose first attempt was sent before
-- this slot started, and never arrived, can prove it absent (see above) instead of waiting for
-- it until its budget is spent.
local quiet = "0"
if start then
    local before = redis.call("hmget", once_slot(once_epoch - 1), "e", "n")
    local upcoming = tonumber(redis.call("hget", next_slot, "e"))
    local wrote_before = tonumber(before[1]) == once_epoch - 1 and before[2] ~= false
    if not wrote_before and (upcoming == nil or upcoming <= once_epoch) then
        quiet = "1"
    end
end
-- The record's commands are asked of the ACL before the step writes: refused after the write,
-- they would fail the call with the write applied and unrecorded, and the caller, taking the
-- refusal for one that wrote nothing, would write again without a record and answer "seen"
-- for what this step added (lua/acl.lua).
if redis.acl_check_cmd then
    local record = {{"hset", slot, once_step, "x"}, {"hdel", slot, once_step}}
    if start or start_next then
        record[3] = {"unlink", slot}
        record[4] = {"pexpire", slot, "1"}
        record[5] = {"hmget", next_slot, "e"}
        record[6] = {"hmget", once_slot(once_epoch - 1), "e"}
        if once_ttl then
            record[7] = {"pttl", KEYS[1]}
        end
    end
    for _, command in ipairs(record) do
        local refused = acl_refusal(once_on, unpack(command))
        if refused then
            return refused
        end
    end
end
local reply = apply()
if once_answer ~= "" and reply == 1 then
    reply = once_answer
end
-- A refusal ({"params", STORED}, {"lost", KEY}, an error) wrote nothing: nothing to record,
-- no slot made.
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
-- The records of answered steps go (from the slots they were most likely written in: the
-- others' go with the TTL), with a step that records: one that writes nothing writes nothing.
if #once_acks > 0 then
    redis.call("hdel", slot, unpack(once_acks))
    redis.call("hdel", once_slot(once_epoch - 1), unpack(once_acks))
end
local record
if type(reply) == "string" then
    record = "s" .. reply
else
    record = "j" .. cjson.encode(reply)
end
-- A slot's TTL, set when it starts and never extended: the ring's whole turn, or the filter
-- key's own when shorter (after expire: its records go with it).
local function ttl()
    local keep = once_slots * once_width
    if once_ttl then
        local own = redis.call("pttl", KEYS[1])
        if own > 0 and own < keep then
            keep = own
        end
    end
    return keep
end
-- A slot starts again as a new key. In a slot a cluster is migrating, a key that went within
-- the script cannot be made again ("non local key"): the write stands, unrecorded, and replies
-- as ever (only a retry of it, after a lost reply, finds no record: its outcome is unknown).
local function remade(made)
    return not (type(made) == "table" and made.err)
end
if start_next then
    local upcoming = tonumber(redis.call("hget", next_slot, "e"))
    if upcoming == nil or upcoming < once_epoch + 1 then
        redis.call("unlink", next_slot)
        if not remade(redis.pcall("hset", next_slot, "e", once_epoch + 1, "t", once_now)) then
            return reply
        end
        redis.call("pexpire", next_slot, ttl())
    end
end
if start then
    redis.call("unlink", slot)
    local made = redis.pcall("hset", slot, "e", once_epoch, "t", once_now, "n", "1", "q", quiet,
        once_step, record)
    if not remade(made) then
        return reply
    end
    redis.call("pexpire", slot, ttl())
else
    if start_next then
        redis.call("hset", slot, "n", "1", once_step, record)
    else
        redis.call("hset", slot, once_step, record)
    end
end
return reply
