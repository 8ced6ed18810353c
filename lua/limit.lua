-- limit: set or remove one group's concurrency ceiling, or the queue-wide
-- flags: allow-oom (it runs while Redis is out of memory; scripts/embed_lua.py)
-- default ceiling (group ''), then put the lanes on or off the ring to
-- match. A group's own ceiling wins over the default. Lowering a ceiling
-- below the live count parks the lane: its active jobs finish, and it gets
-- no new lease until it is under the ceiling again; raising it returns the
-- lane at once. A group's change is O(ring) (reconcile); a default's
-- re-places every registered group (replace_all, O(groups + ring)).
-- KEYS:  the standard ten (lib.lua).
-- ARGV:  1 prefix, 2 group ('' = the queue default), 3 max (0 = remove)
-- Returns 1. Errors: EBRAND, EARG.
local g, max = ARGV[2], tonumber(ARGV[3])
if g ~= '' and not valid_group(g) then return redis.error_reply('EBRAND malformed group id') end
if not max or max < 0 or max ~= math.floor(max) then
  return redis.error_reply('EARG max must be a non-negative integer')
end
local field = g == '' and 'd:limit' or g
if max == 0 then
  call('HDEL', K_GLIMIT, field)
else
  call('HSET', K_GLIMIT, field, int(max))
end
if g == '' then
  replace_all()
else
  reconcile(g)
end
return 1
