-- promote: move delayed jobs that are due into their lanes (or the flat
-- flags: allow-oom (it runs while Redis is out of memory; scripts/embed_lua.py)
-- set), at most max per call; then return the lanes of the throttled
-- index that are due (their rate allows a lease again) to the ring, at
-- most max of them; then, if a default's re-place walk is in progress
-- (lib.lua:replace_begin), one step of it of at most 128 lanes (a few ms
-- at Redis in the worst case, a default rate over one-job lanes); and
-- first, the retention: it deletes the completed rows of the buckets that
-- are due (lib.lua:retire), at most max of them.
-- KEYS:  none read (lib.lua builds every key from ARGV[1]).
-- ARGV:  1 prefix, 2 max (>= 1)
-- Returns {promoted, next}: next is ms until the next delayed job,
-- throttled lane or retention bucket is due (-1 if none), so a timer can
-- sleep exactly that long (0 while a walk has steps left, or rows due are
-- left to delete). promoted counts jobs and lanes.
local max = tonumber(ARGV[2])
if not max or max < 1 then return redis.error_reply('EARG bad batch size') end
local now = now_ms()
clock_ms = now
retire(now, max)
-- A promoted job is claimable from the time it was due (ready_ms), so the
-- wait a lease reports counts the promotion's lag but not the delay asked.
local due = call('ZRANGE', K_DELAYED, '-inf', now, 'BYSCORE', 'LIMIT', 0, max, 'WITHSCORES')
local seen = {} -- lanes this call has put a job in (to_backlog): non-empty
for i = 1, #due, 2 do
  local id = due[i]
  local row = row_key(id)
  local g = call('HGET', row, 'group')
  off_delayed(id, g or '')
  if g then -- a row cannot vanish while delayed; never resurrect one
    call('HSET', row, 'state', 'pending', 'ready_ms', due[i + 1])
    to_backlog(id, g, seen)
  end
end
local lanes = unthrottle_due(now, max)
local nxt = call('ZRANGE', K_DELAYED, 0, 0, 'WITHSCORES')
local nxl = call('ZRANGE', K_THROTTLED, 0, 0, 'WITHSCORES')
local nxr = call('ZRANGE', K_DONE, 0, 0, 'WITHSCORES')
local next_due = tonumber(nxt[2] or '')
local function sooner(s)
  s = tonumber(s or '')
  if s and (not next_due or s < next_due) then next_due = s end
end
sooner(nxl[2])
sooner(nxr[2])
local done = #due / 2 + lanes
if any_limit == nil then any_limit = call('EXISTS', K_GLIMIT) == 1 end
if any_limit and not replace_step(math.min(max, 128)) then return {done, 0} end
-- A bucket due still is rows retire left for the next call.
if nxr[2] and tonumber(nxr[2]) <= now then return {done, 0} end
if not next_due then return {done, -1} end
return {done, math.max(0, math.ceil(next_due - now))}
