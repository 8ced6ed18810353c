-- rate: set or remove one group's rate, or the queue-wide default rate
-- flags: allow-oom (it runs while Redis is out of memory; scripts/embed_lua.py)
-- (group ''): at most max leases per per_ms ms, on the Redis server clock
-- (GCRA with no burst: one lease every per_ms / max ms; see the claim,
-- lua/claim.lua). A group's own rate wins over the default. The rate
-- counts leases; a lease moves the group's TAT (t:G). Setting a rate keeps
-- the TAT (a lane held stays held until then); removing a group's own rate
-- drops its TAT and its place in the throttled index (the default, if any,
-- then applies afresh), and the lane goes on or off the ring to match.
-- Removing or changing the default re-places every registered group
-- (replace_all): those left without any rate are released at once.
-- KEYS:  the standard ten (lib.lua).
-- ARGV:  1 prefix, 2 group ('' = the queue default), 3 max (0 = remove
--        the rate; else 1..1000000), 4 per_ms (1..86400000; ignored when
--        max is 0)
-- Returns 1. Errors: EBRAND, EARG.
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
  if g ~= '' then
    call('HDEL', K_GLIMIT, 't:' .. g)
    call('ZREM', K_THROTTLED, g)
  end
else
  call('HSET', K_GLIMIT, field, int(max) .. ':' .. int(per))
end
if g == '' then
  replace_all()
else
  reconcile(g)
end
return 1
