-- Exact answers across retries (SPEC.md §3), part 1 of 3: this head, then a write step's own
-- script as the body of `apply()`, then once_tail.lua, make one script (src/io/once.rs).
-- The step's own KEYS and ARGV come first; then, last, the ring's slots and five arguments:
-- KEYS[#KEYS - SLOTS + 1 .. #KEYS]: the ring's slots 0 .. SLOTS - 1, hashes in the filter's
-- slot group: field "e" holds a slot's epoch, "t" when it started (server milliseconds), "n"
-- that it started its successor, "q" that it started in its own epoch before any other recorded
-- write of it (once_tail.lua); every other field is one step recorded in that epoch, and
-- its reply. ARGV[#ARGV-4]: the step's id. ARGV[#ARGV-3]: the clock, "WIDTH SLOTS FLOOR
-- KEPT ACK...": the ring's width (ms), its slot count, a lower bound of the step's first sending
-- on the server's clock (ms since 1970, 0 when unknown), "1" when the server was found to evict
-- no key with a TTL (else "0"), and the ids of steps whose callers have
-- their replies (their records go). ARGV[#ARGV-2]: "1" on a retry, else "0". ARGV[#ARGV-1]:
-- "1" when a new slot takes the TTL of the body's KEYS[1] where shorter than its own (the
-- filter's key, which has one after expire), "0" when it never does (a window filter's
-- generations expire by design). ARGV[#ARGV]: the answers the client computed before the
-- write (a dense step that compares and sets: its body replies 1 when it wrote), replied and
-- recorded instead of that 1; "" for a step whose body replies its answers itself.
-- They are taken off, so that the body sees its own KEYS and ARGV.
local once_answer = table.remove(ARGV)
local once_ttl = table.remove(ARGV) == "1"
local once_retry = table.remove(ARGV) == "1"
local once_clock = table.remove(ARGV)
local once_step = table.remove(ARGV)
local once_width, once_slots, once_floor, once_kept
local once_acks = {}
for field in string.gmatch(once_clock, "%S+") do
    if not once_width then
        once_width = tonumber(field)
    elseif not once_slots then
        once_slots = tonumber(field)
    elseif not once_floor then
        once_floor = tonumber(field)
    elseif once_kept == nil then
        once_kept = field == "1"
    else
        once_acks[#once_acks + 1] = field
    end
end
local once_rings = {}
for i = once_slots, 1, -1 do
    once_rings[i] = table.remove(KEYS)
end
-- A step that, when no flag of its reply is set, may be applied again with no other effect
-- than a fresh call's (an add that only sets bits: it changes nothing the first application
-- did not; a counting add-if-absent or remove: it wrote nothing) sets `once_quiet = {FIRST,
-- SKIP}` first thing in apply(): its reply's flags are elements FIRST .. #reply - SKIP (or a
-- string reply's characters, or a number reply), and a reply with none set is not recorded
-- (once_tail.lua).
local once_quiet = nil
local function apply()
