-- groups: one page of the group registry with each group's numbers.
-- flags: allow-oom (it runs while Redis is out of memory; scripts/embed_lua.py)
-- A group that is idle in every way (empty lane, nothing in flight, no
-- ceiling, no weight, no rate, not paused) is dropped from the registry as
-- the page passes it, so the registry does not grow with tenants long
-- gone.
-- KEYS:  the standard ten (lib.lua).
-- ARGV:  1 prefix, 2 cursor ('0' to start), 3 page size hint (>= 1)
-- Returns {next cursor ('0' = done), g, depth, active, limit (-1 = none),
-- paused (0/1), weight (-1 = none set: 1), rate max (-1 = no rate), rate
-- per_ms (-1), throttled (0/1: waiting in the throttled index), g, ...}.
local cursor, count = ARGV[2], tonumber(ARGV[3])
if not count or count < 1 then return redis.error_reply('EARG bad page size') end
local r = call('SSCAN', K_GROUPS, cursor, 'COUNT', count)
local out = {r[1]}
for _, g in ipairs(r[2]) do
  local depth, act = call('ZCARD', lane_key(g)), gactive(g)
  local lim, p = glimit(g), paused(g)
  local f = any_limit and call('HMGET', K_GLIMIT, 'w:' .. g, 'r:' .. g) or {}
  local w = tonumber(f[1] or '')
  local rmax, rper = string.match(f[2] or '', '^(%d+):(%d+)$')
  if depth == 0 and act == 0 and lim == nil and w == nil and not rmax and not p then
    call('SREM', K_GROUPS, g)
  else
    out[#out + 1] = g
    out[#out + 1] = depth
    out[#out + 1] = act
    out[#out + 1] = lim or -1
    out[#out + 1] = p and 1 or 0
    out[#out + 1] = w or -1
    out[#out + 1] = tonumber(rmax or '-1')
    out[#out + 1] = tonumber(rper or '-1')
    out[#out + 1] = call('ZSCORE', K_THROTTLED, g) and 1 or 0
  end
end
return out
