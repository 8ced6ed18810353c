-- rate: set or remove one group's rate, or the queue-wide default rate
-- flags: allow-oom (it runs while Redis is out of memory; scripts/embed_lua.py)
-- (group ''): at most max leases per per_ms ms, on the Redis server clock
-- (a sliding window of the group's leases: lib.lua:window_lease; see the
-- claim, lua/claim.lua). A group's own rate wins over the default. The
-- rate counts leases. Setting or changing a rate re-reads the group's
-- recent leases under the new one (lib.lua:rate_recheck): a lane held by
-- the old rate returns as soon as the new one allows, and one the new rate
-- would hold leaves the ring. Removing a group's own rate drops its window
-- (the default, if any, then applies afresh). Changing or removing the
-- default re-places every lane the same way, in a walk of bounded steps
-- (lib.lua:replace_begin); this call runs the first, replace.lua the rest.
-- KEYS:  none read (lib.lua builds every key from ARGV[1]).
-- ARGV:  1 prefix, 2 group ('' = the queue default), 3 max (0 = remove
--        the rate; else 1..1000000), 4 per_ms (1..86400000; ignored when
--        max is 0), 5 the first step's budget (a default only; optional,
--        1000)
-- Returns 1, or for a default 2 while the walk has steps left.
-- Errors: EBRAND, EARG.
local g, max, per = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
if g ~= '' and not valid_group(g) then return redis.error_reply('EBRAND malformed group id') end
if not max or max < 0 or max > 1000000 or max ~= math.floor(max) then
  return redis.error_reply('EARG max must be an integer 0..1000000')
end
if max > 0 and (not per or per < 1 or per > 86400000 or per ~= math.floor(per)) then
  return redis.error_reply('EARG per_ms must be an integer 1..86400000')
end
local field = g == '' and 'd:rate' or 'r:' .. g
if max == 0 then
  call('HDEL', K_GLIMIT, field)
  -- Its own rate gone, the group starts afresh under the default, if any.
  if g ~= '' then call('DEL', lane_window_key(g)) end
else
  call('HSET', K_GLIMIT, field, int(max) .. ':' .. int(per))
end
if g == '' then
  replace_begin('r')
  return replace_step(tonumber(ARGV[5] or '') or 1000) and 1 or 2
else
  rate_recheck(g)
  reconcile(g)
end
return 1
