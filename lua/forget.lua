-- forget: delete a queue that holds no job: its structures, its groups'
-- ceilings and pauses, its lease counter, and the rows its completed jobs
-- keep for their retention. Those are deleted by the queue's upkeep
-- (lib.lua:retire), which a forgotten queue no longer has, so forget
-- deletes them itself, at most 10,000 per call (a few ms at Redis): a
-- call that deleted that many answers 0 (some may be left), and the
-- daemon calls again.
-- flags: allow-oom (it only deletes; scripts/embed_lua.py)
-- Admin use: O(groups) (it looks at the lane of every registered group,
-- as stats does).
-- KEYS:  none read (lib.lua builds every key from ARGV[1]).
-- ARGV:  1 prefix, 2 most retained rows deleted per call (optional, default
--        10000; tests use a small one)
-- Returns 1 once the queue's keys are gone, 0 when it deleted its most of
-- the retained rows (nothing else changed: call again).
-- Errors: ESTATE when anything is pending, active, delayed or dead
-- (nothing is changed then).
local pending = call('ZCARD', K_PENDING)
for _, g in ipairs(call('SMEMBERS', K_GROUPS)) do pending = pending + call('ZCARD', lane_key(g)) end
local active, delayed, dead = call('ZCARD', K_ACTIVE), call('ZCARD', K_DELAYED), call('ZCARD', K_DEAD)
if pending + active + delayed + dead > 0 then
  return redis.error_reply(string.format(
    'ESTATE the queue holds jobs (pending %d, active %d, delayed %d, dead %d)',
    pending, active, delayed, dead))
end
local most = tonumber(ARGV[2] or '10000')
if not most or most < 1 then return redis.error_reply('EARG bad row budget') end
-- A call that deleted its most may have left some: the next one says.
if retire(0, most, true) >= most then return 0 end
-- Every lane is empty and nothing is active, so of the per-group keys only
-- rate windows may be left (they would expire within their period), and
-- of the prefix-built ones the throttled index (a lane held by its rate
-- that emptied stays in it until due) and the format marker (format.lua:
-- a queue made anew under the name is marked again by the first daemon
-- to use it, in one step, having no delayed job): the rest are the
-- ten fixed keys.
for _, g in ipairs(call('SMEMBERS', K_GROUPS)) do call('DEL', lane_window_key(g)) end
call('UNLINK', K_THROTTLED, K_ON)
-- A re-place walk's old rings (lanes that emptied before it reached them).
local w = walk_of(call('HGET', K_GLIMIT, 'replacing'))
for n = w and w.first or 1, w and w.last or 0 do call('UNLINK', old_ring_key(n)) end
call('DEL', K_RING, K_GLIMIT, K_PAUSED, K_ACTIVE, K_DELAYED, K_DEAD, K_PENDING, K_WAKE, K_SEQ, K_GROUPS,
     PFX .. 'format', K_DONE)
return 1
