-- limit: set or remove one group's concurrency ceiling, then put the lane on
-- flags: allow-oom (it runs while Redis is out of memory; scripts/embed_lua.py)
-- or off the ring to match (lowering below the live count parks the lane
-- until it drains; raising it returns the lane at once).
-- KEYS:  the standard ten (lib.lua).
-- ARGV:  1 prefix, 2 group, 3 max (0 = remove the ceiling)
-- Returns 1. Errors: EBRAND, EARG.
local g, max = ARGV[2], tonumber(ARGV[3])
if not valid_group(g) then return redis.error_reply('EBRAND malformed group id') end
if not max or max < 0 or max ~= math.floor(max) then
  return redis.error_reply('EARG max must be a non-negative integer')
end
if max == 0 then
  call('HDEL', K_GLIMIT, g)
else
  call('HSET', K_GLIMIT, g, max)
end
reconcile(g)
return 1
