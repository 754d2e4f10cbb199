-- The dense check's first step: the head's checks, and the current epoch, before the
-- generations are read (GETRANGE) in the same pipeline. Read-only.
-- Reply: {"at", EPOCH, GONE}: GONE a live generation the ledger lists that is gone
-- (lua/window_args.lua), or "": the client fails the check with it if some item is absent.
return {"at", epoch, lost(epoch, now) or ""}
