-- drain: empty one group's pending backlog, or the flat (ungrouped) one
-- flags: allow-oom (it runs while Redis is out of memory; scripts/embed_lua.py)
-- (bounded per call), and take a drained lane off the ring. Sibling lanes,
-- the ceiling, the pause flag, delayed jobs and jobs in flight are left
-- alone. Drained rows are deleted.
-- KEYS:  none read (lib.lua builds every key from ARGV[1]).
-- ARGV:  1 prefix, 2 group ('' = the flat backlog), 3 at most this many
--        jobs this call (>= 1)
-- Returns {drained, remaining}: call again while remaining > 0.
local g, max = ARGV[2], tonumber(ARGV[3])
if g ~= '' and not valid_group(g) then return redis.error_reply('EBRAND malformed group id') end
if not max or max < 1 then return redis.error_reply('EARG bad batch size') end
local set = g == '' and K_PENDING or lane_key(g)
local popped = call('ZPOPMIN', set, max)
for i = 1, #popped, 2 do call('DEL', row_key(popped[i])) end
if g ~= '' then reconcile(g) end -- the flat set is on no ring
return {#popped / 2, call('ZCARD', set)}
