-- reap: recover jobs whose lease ran out, queue-wide, at most max per call.
-- flags: allow-oom (it runs while Redis is out of memory; scripts/embed_lua.py)
-- Each goes back to its own lane (or the flat set) with its attempt counted,
-- or to the dead set if its attempts are spent. Its old lease token is
-- cleared, so a late complete/fail/extend with it is refused.
-- KEYS:  none read (lib.lua builds every key from ARGV[1]).
-- ARGV:  1 prefix, 2 max (>= 1)
-- Returns {reaped, next}: next is ms until the next lease runs out
-- (-1 if none is held), so a timer can sleep exactly that long.
local max = tonumber(ARGV[2])
if not max or max < 1 then return redis.error_reply('EARG bad batch size') end
local now = now_ms()
local due = call('ZRANGE', K_ACTIVE, '-inf', now, 'BYSCORE', 'LIMIT', 0, max)
for _, id in ipairs(due) do
  local g = call('HGET', row_key(id), 'group') or ''
  leave_active(id, g)
  requeue(id, g, 'lease expired', now)
end
local nxt = call('ZRANGE', K_ACTIVE, 0, 0, 'WITHSCORES')
if #nxt == 0 then return {#due, -1} end
return {#due, math.max(0, tonumber(nxt[2]) - now)}
