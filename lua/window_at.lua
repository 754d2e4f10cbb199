-- The dense check's first step: the head's checks, and the current epoch, before the
-- generations are read (GETRANGE) in the same pipeline. Read-only.
-- Reply: {"at", EPOCH}.
return {"at", epoch}
