-- Exact answers across retries (SPEC.md §3), part 1 of 3: this head, then a write step's own
-- script as the body of `apply()`, then once_tail.lua, make one script.
-- The step's own KEYS and ARGV come first; then, last, one more key and five more arguments:
-- KEYS[#KEYS]: the ring slot of the step, a hash in the filter's slot group: field "e" holds
-- the slot's epoch; every other field is one step recorded in that epoch, and its reply (JSON).
-- ARGV[#ARGV-3]: the step's id. ARGV[#ARGV-2]: its epoch (seconds since 1970 / the ring's
-- width, from its first attempt). ARGV[#ARGV-2]: "1" on a retry, else "0". ARGV[#ARGV-1]:
-- "1" when a new slot takes the TTL of the body's KEYS[1] (the filter's key, which has one
-- after expire), "0" when it never does (a window filter's generations expire by design).
-- ARGV[#ARGV]: the answers the client computed before the write (a dense step that compares
-- and sets: its body replies 1 when it wrote), replied and recorded instead of that 1; "" for
-- a step whose body replies its answers itself.
-- They are taken off, so that the body sees its own KEYS and ARGV.
local once_ring = table.remove(KEYS)
local once_answer = table.remove(ARGV)
local once_ttl = table.remove(ARGV) == "1"
local once_retry = table.remove(ARGV) == "1"
local once_epoch = tonumber(table.remove(ARGV))
local once_step = table.remove(ARGV)
-- A step that, when no flag of its reply is set, may be applied again with no other effect
-- than a fresh call's (an add that only sets bits: it changes nothing the first application
-- did not; a counting add-if-absent or remove: it wrote nothing) sets `once_quiet = {FIRST,
-- SKIP}` first thing in apply(): its reply's flags are elements FIRST .. #reply - SKIP (or a
-- string reply's characters, or a number reply), and a reply with none set is not recorded
-- (once_tail.lua).
local once_quiet = nil
local function apply()
