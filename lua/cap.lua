-- cap: set or remove one group's cap, or the queue-wide default cap
-- flags: allow-oom (it runs while Redis is out of memory; scripts/embed_lua.py)
-- (group ''): the most pending + delayed jobs the group's lane admits. An
-- enqueue into a lane that holds its cap is refused (lib.lua cap_refuses).
-- A group's own cap wins over the default. The cap bounds admission only:
-- a cap set below what a lane holds removes nothing (new jobs are refused
-- until the lane is under it again), and retries, promotions, releases and
-- reassigns are never refused. No lane's place on the ring depends on the
-- cap, so nothing moves and a default needs no pass over the groups (O(1)).
-- KEYS:  none read (lib.lua builds every key from ARGV[1]).
-- ARGV:  1 prefix, 2 group ('' = the queue default), 3 max_pending (0 =
--        remove the cap; else 1..1000000000)
-- Returns 1. Errors: EBRAND, EARG.
local g, max = ARGV[2], tonumber(ARGV[3])
if g ~= '' and not valid_group(g) then return redis.error_reply('EBRAND malformed group id') end
if not max or max < 0 or max > 1000000000 or max ~= math.floor(max) then
  return redis.error_reply('EARG max_pending must be an integer 0..1000000000')
end
local field = g == '' and 'd:cap' or 'c:' .. g
if max == 0 then
  call('HDEL', K_GLIMIT, field)
else
  call('HSET', K_GLIMIT, field, int(max))
end
return 1
