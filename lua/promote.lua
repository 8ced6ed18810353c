-- promote: move delayed jobs that are due into their lanes (or the flat
-- flags: allow-oom (it runs while Redis is out of memory; scripts/embed_lua.py)
-- set), at most max per call.
-- KEYS:  the standard ten (lib.lua).
-- ARGV:  1 prefix, 2 max (>= 1)
-- Returns {promoted, next}: next is ms until the next delayed job is due
-- (-1 if none), so a timer can sleep exactly that long.
local max = tonumber(ARGV[2])
if not max or max < 1 then return redis.error_reply('EARG bad batch size') end
local now = now_ms()
-- A promoted job is claimable from the time it was due (ready_ms), so the
-- wait a lease reports counts the promotion's lag but not the delay asked.
local due = call('ZRANGE', K_DELAYED, '-inf', now, 'BYSCORE', 'LIMIT', 0, max, 'WITHSCORES')
for i = 1, #due, 2 do
  local id = due[i]
  call('ZREM', K_DELAYED, id)
  local row = row_key(id)
  local g = call('HGET', row, 'group')
  if g then -- a row cannot vanish while delayed; never resurrect one
    call('HSET', row, 'state', 'pending', 'ready_ms', due[i + 1])
    to_backlog(id, g)
  end
end
local nxt = call('ZRANGE', K_DELAYED, 0, 0, 'WITHSCORES')
if #nxt == 0 then return {#due / 2, -1} end
return {#due / 2, math.max(0, tonumber(nxt[2]) - now)}
