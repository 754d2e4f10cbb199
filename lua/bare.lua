-- The head of a write's script that is not recorded across retries (the recorded form has
-- lua/once_head.lua instead): the marker a recorded step's body sets when its reply says it
-- wrote nothing (`once_quiet`), unused here.
local once_quiet = nil
