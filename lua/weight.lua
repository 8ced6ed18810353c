-- weight: set or reset one group's weight, its share of the ring's turns.
-- flags: allow-oom (it runs while Redis is out of memory; scripts/embed_lua.py)
-- A lane of weight W is served W jobs per turn (lua/claim.lua); ring
-- membership does not depend on the weight, so nothing moves on or off the
-- ring. If G is the ring head part-way through a turn it has now had its
-- share of (used >= the new weight), the turn ends here: G goes to the tail
-- (LMOVE, O(1)), as the claim would have sent it.
-- KEYS:  the standard ten (lib.lua).
-- ARGV:  1 prefix, 2 group, 3 weight (1..1000; 0 = reset to the default, 1)
-- Returns 1. Errors: EBRAND, EARG.
local g, w = ARGV[2], tonumber(ARGV[3])
if not valid_group(g) then return redis.error_reply('EBRAND malformed group id') end
if not w or w < 0 or w > 1000 or w ~= math.floor(w) then
  return redis.error_reply('EARG weight must be an integer 1..1000, or 0 to reset')
end
local field = 'w:' .. g
if w == 0 then
  if call('HDEL', K_GLIMIT, field) == 1 and call('HINCRBY', K_GLIMIT, 'weighted', -1) <= 0 then
    call('HDEL', K_GLIMIT, 'weighted')
  end
elseif call('HSET', K_GLIMIT, field, int(w)) == 1 then
  call('HINCRBY', K_GLIMIT, 'weighted', 1)
end
local tg, used = turn_of(call('HGET', K_GLIMIT, 'turn'))
if tg == g and used >= math.max(w, 1) then
  call('LMOVE', K_RING, K_RING, 'LEFT', 'RIGHT')
  call('HDEL', K_GLIMIT, 'turn')
end
return 1
