-- rate: set or remove one group's rate: at most max leases per per_ms ms,
-- flags: allow-oom (it runs while Redis is out of memory; scripts/embed_lua.py)
-- on the Redis server clock (GCRA with no burst: one lease every per_ms /
-- max ms; see the claim, lua/claim.lua). The rate counts leases; a lease
-- moves the group's TAT (t:G). Setting a rate keeps the TAT (a lane held
-- stays held until then); removing it drops the TAT and the lane's place
-- in the throttled index, and the lane goes on or off the ring to match.
-- KEYS:  the standard ten (lib.lua).
-- ARGV:  1 prefix, 2 group, 3 max (0 = remove the rate; else 1..1000000),
--        4 per_ms (1..86400000; ignored when max is 0)
-- Returns 1. Errors: EBRAND, EARG.
local g, max, per = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
if not valid_group(g) then return redis.error_reply('EBRAND malformed group id') end
if not max or max < 0 or max > 1000000 or max ~= math.floor(max) then
  return redis.error_reply('EARG max must be an integer 0..1000000')
end
if max > 0 and (not per or per < 1 or per > 86400000 or per ~= math.floor(per)) then
  return redis.error_reply('EARG per_ms must be an integer 1..86400000')
end
if max == 0 then
  call('HDEL', K_GLIMIT, 'r:' .. g, 't:' .. g)
  call('ZREM', K_THROTTLED, g)
else
  call('HSET', K_GLIMIT, 'r:' .. g, int(max) .. ':' .. int(per))
end
reconcile(g)
return 1
