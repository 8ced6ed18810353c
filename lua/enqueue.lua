-- enqueue: admit one job, idempotently.
-- KEYS:  the standard ten (lib.lua).
-- ARGV:  1 prefix, 2 job id, 3 group ('' = flat), 4 payload (JSON text),
--        5 delay_ms (0 = now), 6 max_attempts (0 = unlimited)
-- Returns 1 (enqueued) or 0 (duplicate: a row exists, nothing changed).
-- Errors: EKIND (id not JOB-namespaced), EARG (malformed id or number),
--         EBRAND (malformed group).
local id, g, payload = ARGV[2], ARGV[3], ARGV[4]
local delay, max = tonumber(ARGV[5]), tonumber(ARGV[6])
if string.sub(id, 1, 3) ~= 'JOB' then
  return redis.error_reply('EKIND job id must be JOB-namespaced')
end
if not valid_job(id) then return redis.error_reply('EARG malformed job id') end
if g ~= '' and not valid_group(g) then
  return redis.error_reply('EBRAND malformed group id')
end
if not delay or delay < 0 or not max or max < 0 then
  return redis.error_reply('EARG delay_ms and max_attempts must be non-negative')
end
local row = row_key(id)
-- Every row has a state, so setting it only where there is none both
-- refuses a duplicate and starts the row (one call instead of EXISTS + HSET).
if call('HSETNX', row, 'state', delay > 0 and 'delayed' or 'pending') == 0 then return 0 end
local now = now_ms()
call('HSET', row, 'group', g, 'payload', payload, 'attempts', 0,
     'max_attempts', max, 'created_ms', now)
if delay > 0 then
  call('ZADD', K_DELAYED, now + delay, id)
  if g ~= '' then call('SADD', K_GROUPS, g) end
  return 1
end
to_backlog(id, g)
return 1
