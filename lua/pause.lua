-- pause: hold one group. Its lane leaves the ring; its backlog and its jobs
-- flags: allow-oom (it runs while Redis is out of memory; scripts/embed_lua.py)
-- in flight are untouched (they may still complete).
-- KEYS:  none read (lib.lua builds every key from ARGV[1]).
-- ARGV:  1 prefix, 2 group
-- Returns 1 if the group was not paused before, 0 if it already was.
local g = ARGV[2]
if not valid_group(g) then return redis.error_reply('EBRAND malformed group id') end
local added = call('SADD', K_PAUSED, g)
reconcile(g)
return added
