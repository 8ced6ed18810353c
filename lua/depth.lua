-- depth: the pending count of one group's lane, or of the flat set.
-- flags: no-writes (it only reads; Redis refuses a write; scripts/embed_lua.py)
-- KEYS:  none read (lib.lua builds every key from ARGV[1]).
-- ARGV:  1 prefix, 2 group ('' = the flat set)
-- Returns the count.
local g = ARGV[2]
if g == '' then return call('ZCARD', K_PENDING) end
if not valid_group(g) then return redis.error_reply('EBRAND malformed group id') end
return call('ZCARD', lane_key(g))
