-- fail: a worker gives a leased job back as failed.
-- flags: allow-oom (it runs while Redis is out of memory; scripts/embed_lua.py)
-- KEYS:  the standard ten (lib.lua).
-- ARGV:  1 prefix, 2 job id, 3 lease token, 4 error text,
--        5 retry_ms (-1 = exponential backoff: 1 s * 2^(attempt-1), capped
--        at 1 h; 0 = back to its lane at once), 6 dead ('1' = dead-letter now)
-- Returns the job's new state: 'delayed', 'pending' or 'dead'.
-- Errors: ENOJOB, ELEASE (stale or not active: nothing changed), EARG.
local id, tok, reason = ARGV[2], ARGV[3], ARGV[4]
local retry, dead = tonumber(ARGV[5]), ARGV[6] == '1'
if not retry or retry < -1 then return redis.error_reply('EARG bad retry_ms') end
-- The attempts come with the lease check: one read of the row.
local g, f = check_lease(id, tok, 'attempts', 'max_attempts')
if not g then
  if f == 'ENOJOB' then return redis.error_reply('ENOJOB no such job') end
  return redis.error_reply('ELEASE lease is not current')
end
leave_active(id, g)
local now = now_ms()
local row = row_key(id)
local att, max = tonumber(f[4]), tonumber(f[5])
if dead or (max > 0 and att >= max) then
  call('HDEL', row, 'lease', 'lease_until')
  call('HSET', row, 'state', 'dead', 'error', reason, 'finished_ms', int(now))
  call('ZADD', K_DEAD, int(now), id)
  return 'dead'
end
if retry == -1 then
  retry = math.min(1000 * 2 ^ math.min(att - 1, 22), 3600000)
end
if retry == 0 then return requeue(id, g, reason, now) end
call('HDEL', row, 'lease', 'lease_until')
call('HSET', row, 'state', 'delayed', 'error', reason)
to_delayed(id, g, int(now + retry))
return 'delayed'
