-- limit: set or remove one group's concurrency ceiling, or the queue-wide
-- flags: allow-oom (it runs while Redis is out of memory; scripts/embed_lua.py)
-- default ceiling (group ''), then put the lanes on or off the ring to
-- match. A group's own ceiling wins over the default. Lowering a ceiling
-- below the live count parks the lane: its active jobs finish, and it gets
-- no new lease until it is under the ceiling again; raising it returns the
-- lane at once. A group's change is O(ring) (reconcile); a default's
-- starts a walk that re-places every lane in bounded steps (lib.lua:
-- replace_begin), and runs its first step; replace.lua runs the rest.
-- KEYS:  none read (lib.lua builds every key from ARGV[1]).
-- ARGV:  1 prefix, 2 group ('' = the queue default), 3 max (0 = remove),
--        4 the first step's budget (a default only; optional, 1000)
-- Returns 1, or for a default 2 while the walk has steps left.
-- Errors: EBRAND, EARG.
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
  replace_begin('l')
  return replace_step(tonumber(ARGV[4] or '') or 1000) and 1 or 2
else
  reconcile(g)
end
return 1
