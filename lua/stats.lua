-- stats: queue-wide totals. Admin use: O(groups) (it sums the lanes of the
-- group registry).
-- flags: no-writes (it only reads; Redis refuses a write; scripts/embed_lua.py)
-- KEYS:  none read (lib.lua builds every key from ARGV[1]).
-- ARGV:  1 prefix
-- Returns {pending, active, delayed, dead, ring, groups, paused, flat,
-- default limit, default weight, default rate max, default rate per_ms,
-- default cap}:
-- pending counts every lane and the flat set; flat is the flat set alone;
-- the defaults (lib.lua's d: fields) are -1 when not set.
local flat = call('ZCARD', K_PENDING)
local pending = flat
local groups = call('SMEMBERS', K_GROUPS)
for _, g in ipairs(groups) do pending = pending + call('ZCARD', lane_key(g)) end
local d = call('HMGET', K_GLIMIT, 'd:limit', 'd:weight', 'd:rate', 'd:cap', 'replacing')
-- During a re-place walk the lanes not yet placed wait in old rings: they
-- are serviceable lanes still, counted in ring.
local ring = call('LLEN', K_RING)
local w = walk_of(d[5])
for n = w and w.first or 1, w and w.last or 0 do ring = ring + call('LLEN', old_ring_key(n)) end
local rmax, rper = string.match(d[3] or '', '^(%d+):(%d+)$')
return {pending, call('ZCARD', K_ACTIVE), call('ZCARD', K_DELAYED), call('ZCARD', K_DEAD),
        ring, #groups, call('SCARD', K_PAUSED), flat,
        tonumber(d[1] or '-1'), tonumber(d[2] or '-1'), tonumber(rmax or '-1'),
        tonumber(rper or '-1'), tonumber(d[4] or '-1')}
