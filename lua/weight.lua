-- weight: set or reset one group's weight, its share of the ring's turns,
-- flags: allow-oom (it runs while Redis is out of memory; scripts/embed_lua.py)
-- or the queue-wide default weight (group ''), which applies to every group
-- without a weight of its own. A lane of weight W is served W jobs per turn
-- (lua/claim.lua); ring membership does not depend on the weight, so
-- nothing moves on or off the ring and a default needs no pass over the
-- groups. If the ring head is part-way through a turn it has now had its
-- share of (used >= its new weight), the turn ends here: the head goes to
-- the tail (LMOVE, O(1)), as the claim would have sent it.
-- KEYS:  none read (lib.lua builds every key from ARGV[1]).
-- ARGV:  1 prefix, 2 group ('' = the queue default), 3 weight (1..1000;
--        0 = remove the setting: the default, or else 1, applies)
-- Returns 1. Errors: EBRAND, EARG.
local g, w = ARGV[2], tonumber(ARGV[3])
if g ~= '' and not valid_group(g) then return redis.error_reply('EBRAND malformed group id') end
if not w or w < 0 or w > 1000 or w ~= math.floor(w) then
  return redis.error_reply('EARG weight must be an integer 1..1000, or 0 to reset')
end
if g == '' then
  -- weighted counts the w: fields only; the claim also looks for d:weight.
  if w == 0 then
    call('HDEL', K_GLIMIT, 'd:weight')
  else
    call('HSET', K_GLIMIT, 'd:weight', int(w))
  end
else
  local field = 'w:' .. g
  if w == 0 then
    if call('HDEL', K_GLIMIT, field) == 1 and call('HINCRBY', K_GLIMIT, 'weighted', -1) <= 0 then
      call('HDEL', K_GLIMIT, 'weighted')
    end
  elseif call('HSET', K_GLIMIT, field, int(w)) == 1 then
    call('HINCRBY', K_GLIMIT, 'weighted', 1)
  end
end
local tg, used = turn_of(call('HGET', K_GLIMIT, 'turn'))
if tg then
  local f = call('HMGET', K_GLIMIT, 'w:' .. tg, 'd:weight')
  if used >= (tonumber(f[1] or f[2] or '') or 1) then
    call('LMOVE', K_RING, K_RING, 'LEFT', 'RIGHT')
    call('HDEL', K_GLIMIT, 'turn')
  end
end
return 1
