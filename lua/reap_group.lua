-- reap_group: recover one group's expired leases only. It reads the group's
-- flags: allow-oom (it runs while Redis is out of memory; scripts/embed_lua.py)
-- own lease index (g:<G>:active), so the cost is O(log n + that group's
-- expired leases) and other groups' expired leases are left alone.
-- KEYS:  none read (lib.lua builds every key from ARGV[1]).
-- ARGV:  1 prefix, 2 group, 3 max (>= 1)
-- Returns the number reaped.
local g, max = ARGV[2], tonumber(ARGV[3])
if not valid_group(g) then return redis.error_reply('EBRAND malformed group id') end
if not max or max < 1 then return redis.error_reply('EARG bad batch size') end
local now = now_ms()
local due = call('ZRANGE', lane_active_key(g), '-inf', now, 'BYSCORE', 'LIMIT', 0, max)
for _, id in ipairs(due) do
  leave_active(id, g)
  requeue(id, g, 'lease expired', now)
end
return #due
