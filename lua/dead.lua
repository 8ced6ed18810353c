-- dead: the dead-letter set of a queue.
-- flags: allow-oom (it runs while Redis is out of memory; scripts/embed_lua.py)
-- KEYS:  none read (lib.lua builds every key from ARGV[1]).
-- ARGV:  1 prefix, 2 action ('list' | 'retry' | 'purge'), 3 job id ('' =
--        the oldest, up to the limit), 4 limit (>= 1)
-- Returns, for 'list': {id, group, attempts, error, died_ms, ...} (oldest
-- first); for 'retry' (back to its lane, attempts reset) and 'purge' (row
-- deleted): the number of jobs moved.
-- Errors: EARG; ENOJOB when a named job is not dead.
local action, id, limit = ARGV[2], ARGV[3], tonumber(ARGV[4])
if not limit or limit < 1 then return redis.error_reply('EARG bad limit') end
local ids
if id ~= '' then
  if not call('ZSCORE', K_DEAD, id) then return redis.error_reply('ENOJOB no such dead job') end
  ids = {id}
else
  ids = call('ZRANGE', K_DEAD, 0, limit - 1)
end
if action == 'list' then
  local out = {}
  for _, j in ipairs(ids) do
    local f = call('HMGET', row_key(j), 'group', 'attempts', 'error', 'finished_ms')
    out[#out + 1] = j
    out[#out + 1] = f[1] or ''
    out[#out + 1] = tonumber(f[2] or '0')
    out[#out + 1] = f[3] or ''
    out[#out + 1] = tonumber(f[4] or '0')
  end
  return out
elseif action == 'retry' then
  local now, seen = int(now_ms()), {} -- seen: see to_backlog
  for _, j in ipairs(ids) do
    call('ZREM', K_DEAD, j)
    local row = row_key(j)
    call('HSET', row, 'state', 'pending', 'attempts', '0', 'ready_ms', now)
    call('HDEL', row, 'finished_ms')
    to_backlog(j, call('HGET', row, 'group') or '', seen)
  end
  return #ids
elseif action == 'purge' then
  for _, j in ipairs(ids) do
    call('ZREM', K_DEAD, j)
    call('DEL', row_key(j))
  end
  return #ids
end
return redis.error_reply('EARG action must be list, retry or purge')
