-- extend: heartbeat a lease so a long job is not reaped.
-- flags: allow-oom (it runs while Redis is out of memory; scripts/embed_lua.py)
-- KEYS:  none read (lib.lua builds every key from ARGV[1]).
-- ARGV:  1 prefix, 2 job id, 3 lease token, 4 lease_ms (from now, >= 1)
-- Returns the new deadline (server ms).
-- Errors: ENOJOB, ELEASE (stale or not active: nothing changed), EARG.
local id, tok, lease_ms = ARGV[2], ARGV[3], tonumber(ARGV[4])
if not lease_ms or lease_ms < 1 then
  return redis.error_reply('EARG lease_ms must be positive')
end
local g, err = check_lease(id, tok)
if not g then
  if err == 'ENOJOB' then return redis.error_reply('ENOJOB no such job') end
  return redis.error_reply('ELEASE lease is not current')
end
local deadline = now_ms() + lease_ms
local dl = int(deadline)
call('ZADD', K_ACTIVE, 'XX', dl, id)
if g ~= '' then call('ZADD', lane_active_key(g), 'XX', dl, id) end
return deadline
