-- complete: settle one or more leased jobs as done (completions that arrive
-- flags: allow-oom (it runs while Redis is out of memory; scripts/embed_lua.py)
-- together are coalesced into one call).
-- KEYS:  the standard ten (lib.lua).
-- ARGV:  1 prefix, 2 retention_ms (how long the row is kept so a re-sent id
--        is still a duplicate; 0 deletes it at once), then pairs
--        (job id, lease token).
-- Returns one status per pair: 'completed', 'ENOJOB' (no such job) or
-- 'ELEASE' (not active, or the token is stale: nothing changed).
-- Re-sending a completion that already succeeded (same token; e.g. after
-- the reply was lost) answers 'completed' again and changes nothing: the
-- completed row keeps its last token for exactly this.
local keep = tonumber(ARGV[2])
if not keep or keep < 0 or #ARGV < 4 or #ARGV % 2 ~= 0 then
  return redis.error_reply('EARG retention_ms and (job, lease) pairs expected')
end
local now = int(now_ms())
local out = {}
for i = 3, #ARGV, 2 do
  local id = ARGV[i]
  local g, err = check_lease(id, ARGV[i + 1])
  if err == 'ELEASE' then
    local f = call('HMGET', row_key(id), 'state', 'lease')
    if f[1] == 'completed' and f[2] == ARGV[i + 1] then g, err = nil, 'completed' end
  end
  if not g then
    out[#out + 1] = err
  else
    leave_active(id, g)
    local row = row_key(id)
    if keep == 0 then
      call('DEL', row)
    else
      call('HSET', row, 'state', 'completed', 'finished_ms', now)
      -- The payload is not needed to answer 'duplicate'; free it now.
      call('HDEL', row, 'lease_until', 'payload')
      call('PEXPIRE', row, int(keep))
    end
    out[#out + 1] = 'completed'
  end
end
return out
