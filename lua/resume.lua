-- resume: release a paused group; its lane returns to the ring (with a wake)
-- flags: allow-oom (it runs while Redis is out of memory; scripts/embed_lua.py)
-- if it is serviceable.
-- KEYS:  none read (lib.lua builds every key from ARGV[1]).
-- ARGV:  1 prefix, 2 group
-- Returns 1 if the group was paused, 0 if it was not.
local g = ARGV[2]
if not valid_group(g) then return redis.error_reply('EBRAND malformed group id') end
local removed = call('SREM', K_PAUSED, g)
reconcile(g)
return removed
