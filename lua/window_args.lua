-- The head of every window script (concatenated before it): its arguments. Then come
-- lua/window_check.lua (the parameters check) and lua/window_epoch.lua (the server's clock),
-- in the order each script needs.
-- A generation is one key per epoch E = floor(now_ms * (G - 1) / window_ms) of the server's
-- clock; G of them are live (E, E-1, ..., E-G+1). The client names the keys, since a script
-- must declare every key it touches (Redis Cluster): it guesses the epoch, and the server's
-- clock decides.
-- KEYS[1..G+2]: the generations of epochs GUESS+1, GUESS, GUESS-1, ..., GUESS-G.
-- KEYS[G+3], KEYS[G+4] (a filter of one key; a sharded filter checks its parameters apart):
-- the stored parameters and the bare key, which must not hold a filter of another kind.
-- KEYS[#KEYS] (the dense add only): its scratch key, after them.
-- ARGV[1]: GUESS. ARGV[2]: the window in ms. ARGV[3]: G. ARGV[4]: the parameters.
-- ARGV[5]: "1" to store the parameters when there are none (a write), else "0".
-- ARGV[6]: the command that reads bits: "bitfield_ro" (Redis 6.2+), else "bitfield".
-- Adds and checks reply their flags, then `verified` (below).
-- Refusals (instead of the script's own reply): {"epoch", NOW_MS} when the guess is more than
-- one generation off; {"params", STORED} when the parameters differ ("" when the bare key
-- holds bits without parameters).
local guess, window, g = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local params = nil
if #KEYS >= g + 4 then
    params = KEYS[g + 3]
end
-- Whether lua/window_check.lua checks the parameters (an add checks them only when it
-- creates a generation: a generation's name holds a hash of its filter's parameters, so one
-- that exists was created by a step that checked them).
local check = true
-- 1 when this step saw the filter's own parameters stored (or stored them): the client then
-- leaves them out of its checks.
local verified = 0
