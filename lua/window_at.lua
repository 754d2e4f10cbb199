-- The dense check's first step: the head's checks, and the current epoch, before the
-- generations are read (GETRANGE) in the same pipeline. Read-only.
-- Reply: {"at", EPOCH}, or {"lost", KEY} (lua/window_args.lua's ledger).
local gone = lost(epoch, now)
if gone then
    return {"lost", gone}
end
return {"at", epoch}
