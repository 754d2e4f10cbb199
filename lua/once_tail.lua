end
-- Exact answers across retries, part 3 of 3 (see once_head.lua).
-- A step recorded in its slot replies what it replied then, and applies nothing again. A
-- record is the reply: "s" and a string (a dense step's bytes from before, a batch's flags),
-- or "j" and an array of integers as JSON.
local done = redis.call("hget", once_ring, once_step)
if done then
    if string.sub(done, 1, 1) == "s" then
        return string.sub(done, 2)
    end
    return cjson.decode(string.sub(done, 2))
end
-- A slot is only ever reset to a later epoch. A retry that finds its slot at a later epoch
-- than its own may have been applied and its record dropped: its outcome is unknown, and it
-- applies nothing. A first attempt there is recorded in that later epoch, kept as long.
local epoch = tonumber(redis.call("hget", once_ring, "e") or "-1")
if epoch > once_epoch then
    if once_retry then
        return redis.error_reply("OUTCOMEUNKNOWN a retried write's record could be gone")
    end
elseif epoch < once_epoch then
    redis.call("unlink", once_ring)
    redis.call("hset", once_ring, "e", once_epoch)
end
local reply = apply()
-- A refusal ({"params", STORED}, an error) wrote nothing: nothing to record.
if type(reply) == "table" and (reply.err or reply.ok or type(reply[1]) == "string") then
    return reply
end
if type(reply) == "string" then
    redis.call("hset", once_ring, once_step, "s" .. reply)
else
    redis.call("hset", once_ring, once_step, "j" .. cjson.encode(reply))
end
return reply
