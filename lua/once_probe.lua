-- Exact answers across retries (SPEC.md §3) on a server that cannot answer ACL questions in a
-- script (`redis.acl_check_cmd`: Redis 7 and Valkey ask it in every recorded step,
-- lua/once_tail.lua; Redis 6 lacks it): before a filter's first recorded write, the record's
-- commands are proven on KEYS[1], a key of its ring's pattern that holds nothing, so that a
-- user the ACL refuses them learns it before anything is written, and the client writes without
-- records (as when the ACL refuses the recording script itself) instead of recording steps whose
-- record then fails after their write. TIME, HGET, HMGET, HDEL, PTTL, PEXPIRE and UNLINK of a key that does not exist
-- change nothing; the HSET's key is unlinked again (proven). None of it is replicated or
-- appended to the AOF (set_repl): it leaves nothing. Reply: 1 when proven, 0 when the steps ask
-- the ACL themselves.
if redis.acl_check_cmd then
    return 0
end
redis.set_repl(redis.REPL_NONE)
redis.call("time")
redis.call("hget", KEYS[1], "probe")
redis.call("hmget", KEYS[1], "e", "n")
redis.call("exists", KEYS[1])
redis.call("hdel", KEYS[1], "probe")
redis.call("pttl", KEYS[1])
redis.call("pexpire", KEYS[1], "1")
redis.call("unlink", KEYS[1])
redis.call("hset", KEYS[1], "probe", "1")
redis.call("unlink", KEYS[1])
return 1
