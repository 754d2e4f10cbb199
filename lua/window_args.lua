-- The head of every window script (concatenated before it): its arguments. Then come
-- lua/window_check.lua (the parameters check) and lua/window_epoch.lua (the server's clock),
-- in the order each script needs.
-- A generation is one key per epoch E = floor(now_ms * (G - 1) / window_ms) of the server's
-- clock; G of them are live (E, E-1, ..., E-G+1). The client names the keys, since a script
-- must declare every key it touches (Redis Cluster): it guesses the epoch, and the server's
-- clock decides.
-- KEYS[1..G+2]: the generations of epochs GUESS+1, GUESS, GUESS-1, ..., GUESS-G.
-- KEYS[G+3]: the part's ledger of the generations it made (below).
-- KEYS[G+4], KEYS[G+5] (a filter of one key; a sharded filter checks its parameters apart):
-- the stored parameters and the bare key, which must not hold a filter of another kind.
-- KEYS[#KEYS] (the dense add only): its scratch key, after them.
-- ARGV[1]: GUESS. ARGV[2]: the window in ms. ARGV[3]: G. ARGV[4]: the parameters.
-- ARGV[5]: "1" to store the parameters when there are none (a write), else "0".
-- ARGV[6]: the command that reads bits: "bitfield_ro" (Redis 6.2+), else "bitfield"; then a
-- space and the bytes a new generation is made with (lua/window_create.lua): read here into
-- `read_command` and `made_bytes`.
-- Adds and checks reply their flags, then `verified` (below).
-- Refusals (instead of the script's own reply): {"epoch", NOW_MS} when the guess is more than
-- one generation off; {"params", STORED} when the parameters differ ("" when the bare key
-- holds bits without parameters); {"lost", KEY} when a check finds a live generation the
-- ledger lists gone.
local guess, window, g = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local read_command, made_bytes = ARGV[6], 0
do
    local command, bytes = string.match(ARGV[6], "^(%S+) (%d+)$")
    if command then
        read_command, made_bytes = command, tonumber(bytes)
    end
end
local params = nil
if #KEYS >= g + 5 then
    params = KEYS[g + 4]
end
-- The ledger: "EPOCH:AT," for each generation the part made that has not left the window, AT
-- its absolute expiry (ms). Written by the step that makes a generation (a string read and
-- rewritten whole: a few dozen bytes), it expires with the newest. A generation it lists as
-- live whose key is missing was deleted by hand or evicted: checks fail naming it (SPEC.md §3,
-- "lost data is an error") instead of answering "absent". A generation made by an import is
-- not listed (a replace deletes the ledger with the generations it replaces).
-- Two marks may follow the entries: "u:MS," the absolute deadline (ms) that `expire` gave the
-- filter, and "p:MS," the expiry the step that made the newest generation gave the parameters
-- of a filter of one key (SPEC.md §3: they expire with the generations, so that a window whose
-- generations have all left holds nothing).
local made = KEYS[g + 3]
local function ledger()
    local list = {}
    for e, at in string.gmatch(redis.call("get", made) or "", "(%-?%d+):(%d+),") do
        list[#list + 1] = {tonumber(e), tonumber(at)}
    end
    return list
end
-- The deadline `expire` gave the filter (ms), or nil: the ledger's "u:" mark; a filter whose
-- ledger has neither mark (made by an earlier build, or expired before it made a generation)
-- keeps it as its parameters' TTL.
local function deadline(now)
    local text = redis.call("get", made) or ""
    local until_ms = string.match(text, "u:(%d+),")
    if until_ms then
        return tonumber(until_ms)
    end
    if params and not string.find(text, "p:", 1, true) then
        local left = redis.call("pttl", params)
        if left > 0 then
            return now + left
        end
    end
    return nil
end
-- The absolute expiry (ms) of generation `e` made at `now`: the moment it leaves the window
-- (sooner when the filter was given a shorter TTL by expire). Redis deletes a key once its time
-- is past `at`, so at - 1 makes it go at the boundary.
local function expiry(e, now)
    local at = math.ceil((e + g) * window / (g - 1)) - 1
    local cap = deadline(now)
    if cap and cap < at then
        at = cap
    end
    return math.max(at, now + 1)
end
-- Lists generation `e` (expiring at `at`) as made at `now`, dropping those gone; the
-- parameters of a filter of one key then expire with the newest generation (a refusal by the
-- ACL leaves them as they were: it must not fail a step that made a generation).
local function made_at(e, at, now)
    local cap = deadline(now)
    local text, last = string.format("%d:%d,", e, at), at
    for _, entry in ipairs(ledger()) do
        if entry[1] ~= e and entry[2] > now then
            text = text .. string.format("%d:%d,", entry[1], entry[2])
            last = math.max(last, entry[2])
        end
    end
    if cap then
        text = text .. string.format("u:%d,", cap)
    end
    if params and redis.call("exists", params) == 1 then
        -- (SET, which every window user may run, rather than PEXPIREAT: the value is the
        -- client's parameters, checked by this step.)
        redis.pcall("set", params, ARGV[4], "PX", math.max(1, last - now))
        text = text .. string.format("p:%d,", last)
    end
    redis.call("set", made, text, "PX", math.max(1, last - now))
end
-- The key of a live generation (epochs `epoch` down to `epoch - g + 1`) the ledger lists, with
-- more than a second left (a replica whose clock lags the master's may see a generation the
-- master expired), that is missing; nil when none is.
local function lost(epoch, now)
    local listed = {}
    for _, entry in ipairs(ledger()) do
        local e = entry[1]
        if e <= epoch and e > epoch - g and entry[2] - now > 1000 then
            listed[#listed + 1] = KEYS[guess + 2 - e]
        end
    end
    -- One EXISTS of them all; which one is gone only when one is.
    if #listed == 0 or redis.call("exists", unpack(listed)) == #listed then
        return nil
    end
    for _, key in ipairs(listed) do
        if redis.call("exists", key) == 0 then
            return key
        end
    end
    return nil
end
-- Whether lua/window_check.lua checks the parameters (an add checks them only when it
-- creates a generation: a generation's name holds a hash of its filter's parameters, so one
-- that exists was created by a step that checked them).
local check = true
-- 1 when this step saw the filter's own parameters stored (or stored them): the client then
-- leaves them out of its checks.
local verified = 0
