-- groups: one page of the group registry with each group's numbers.
-- flags: allow-oom (it runs while Redis is out of memory; scripts/embed_lua.py)
-- A group that is idle in every way (empty lane, nothing in flight or
-- delayed, no ceiling, weight, rate or cap of its own, not paused, no
-- lease of the last P ms in the window of a default rate that applies to
-- it) is dropped from the registry as the page passes it (and its spent
-- t:G with it), so the registry does not grow with tenants long gone.
-- KEYS:  none read (lib.lua builds every key from ARGV[1]).
-- ARGV:  1 prefix, 2 cursor ('0' to start), 3 page size hint (>= 1)
-- Returns {next cursor ('0' = done), g, depth, active, limit (-1 = none),
-- paused (0/1), weight (-1 = none set: 1), rate max (-1 = no rate), rate
-- per_ms (-1), throttled (0/1: waiting in the throttled index), and where
-- the limit, the weight and the rate come from (each 0 none, 1 the
-- group's own, 2 the queue default), delayed (its delayed jobs), cap
-- (-1 = none) and where the cap comes from (0, 1, 2), g, ...}: what
-- applies to each group.
local cursor, count = ARGV[2], tonumber(ARGV[3])
if not count or count < 1 then return redis.error_reply('EARG bad page size') end
local r = call('SSCAN', K_GROUPS, cursor, 'COUNT', count)
local out = {r[1]}

-- The setting that applies, own (index i) else default (index d), and
-- where it comes from.
local function applying(f, i, d)
  if f[i] then return f[i], 1 end
  if f[d] then return f[d], 2 end
  return nil, 0
end

if any_limit == nil then any_limit = call('EXISTS', K_GLIMIT) == 1 end
for _, g in ipairs(r[2]) do
  local depth, act, p = call('ZCARD', lane_key(g)), gactive(g), paused(g)
  local f = any_limit and call('HMGET', K_GLIMIT, g, 'w:' .. g, 'r:' .. g, 't:' .. g, 'd:limit',
                               'd:weight', 'd:rate', 'c:' .. g, 'd:cap') or {}
  local delayed = call('ZCARD', lane_delayed_key(g))
  local lim, lim_from = applying(f, 1, 5)
  local w, w_from = applying(f, 2, 6)
  local rate, rate_from = applying(f, 3, 7)
  local rmax, rper = string.match(rate or '', '^(%d+):(%d+)$')
  local tat = tonumber(f[4] or '')
  local cap, cap_from = applying(f, 8, 9)
  if depth == 0 and act == 0 and delayed == 0 and not p and not f[1] and not f[2] and not f[3]
     and not f[8]
     and not (tat and tat > clock())
     and not (rate and call('EXISTS', lane_window_key(g)) == 1) then
    call('SREM', K_GROUPS, g)
    if tat then call('HDEL', K_GLIMIT, 't:' .. g) end
  else
    out[#out + 1] = g
    out[#out + 1] = depth
    out[#out + 1] = act
    out[#out + 1] = tonumber(lim or '-1')
    out[#out + 1] = p and 1 or 0
    out[#out + 1] = tonumber(w or '-1')
    out[#out + 1] = tonumber(rmax or '-1')
    out[#out + 1] = tonumber(rper or '-1')
    out[#out + 1] = call('ZSCORE', K_THROTTLED, g) and 1 or 0
    out[#out + 1] = lim_from
    out[#out + 1] = w_from
    out[#out + 1] = rmax and rate_from or 0
    out[#out + 1] = delayed
    out[#out + 1] = tonumber(cap or '-1')
    out[#out + 1] = cap_from
  end
end
return out
