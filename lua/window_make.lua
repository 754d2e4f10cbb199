-- The add by ranges' first step (generations past 4 MiB): the current generation made (lua/
-- window_create.lua) and its epoch, to which the batch's ranges are then pinned.
-- Reply: {"at", EPOCH}.
return {"at", epoch}
