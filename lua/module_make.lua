-- Makes one part of a sharded module filter when it does not exist (one that exists is left as
-- it is): every part is made before the filter's parameters are stored, so that a part that is
-- gone while they are stored is lost data, not a part no item reached (SPEC.md §3).
-- KEYS[1]: the part. ARGV[1]: the error rate. ARGV[2]: the part's capacity. ARGV[3]: the
-- expansion ("" for the module's default).
-- Reply: 1 when made, 0 when it existed.
if redis.call("exists", KEYS[1]) == 1 then
    return 0
end
if ARGV[3] == "" then
    redis.call("BF.RESERVE", KEYS[1], ARGV[1], ARGV[2])
else
    redis.call("BF.RESERVE", KEYS[1], ARGV[1], ARGV[2], "EXPANSION", ARGV[3])
end
return 1
