-- complete: settle one or more leased jobs as done (completions that arrive
-- flags: allow-oom (it runs while Redis is out of memory; scripts/embed_lua.py)
-- together are coalesced into one call).
-- KEYS:  the standard ten (lib.lua).
-- ARGV:  1 prefix, 2 retention_ms (how long the row is kept so a re-sent id
--        is still a duplicate; 0 deletes it at once), then pairs
--        (job id, lease token).
-- A kept row goes into the retention bucket of the second at or after now
-- + retention_ms, one RPUSH for the call's completions (lib.lua:retire).
-- Returns one status per pair: 'completed', 'ENOJOB' (no such job) or
-- 'ELEASE' (not active, or the token is stale: nothing changed).
-- Re-sending a completion that already succeeded (same token; e.g. after
-- the reply was lost) answers 'completed' again and changes nothing: the
-- completed row keeps its last token for exactly this.
local keep = tonumber(ARGV[2])
if not keep or keep < 0 or #ARGV < 4 or #ARGV % 2 ~= 0 then
  return redis.error_reply('EARG retention_ms and (job, lease) pairs expected')
end
local t_now = now_ms()
local now = int(t_now)
local out, kept = {}, {}
-- With no lane setting no permit is given back, so the call's jobs leave
-- the lease indexes together (lib.lua: batch_run).
if any_limit == nil then any_limit = call('EXISTS', K_GLIMIT) == 1 end
local gone = not any_limit and batch_new()
for i = 3, #ARGV, 2 do
  local id, tok = ARGV[i], ARGV[i + 1]
  local row = row_key(id)
  local f = call('HMGET', row, 'state', 'lease', 'group')
  if not f[1] then
    out[#out + 1] = 'ENOJOB'
  elseif f[1] ~= 'active' or f[2] ~= tok then
    out[#out + 1] = f[1] == 'completed' and f[2] == tok and 'completed' or 'ELEASE'
  else
    if gone then
      batch_put(gone, f[3] or '', id)
    else
      leave_active(id, f[3] or '')
    end
    if keep == 0 then
      call('DEL', row)
    else
      -- The payload is not needed to answer 'duplicate': it is freed now,
      -- overwritten with '' in the same call as the state (an HDEL would be
      -- one more call per job); lease_until likewise. job.lua reads an
      -- empty payload or lease_until as absent.
      call('HSET', row, 'state', 'completed', 'finished_ms', now, 'payload', '', 'lease_until', '')
      kept[#kept + 1] = id
    end
    out[#out + 1] = 'completed'
  end
end
if gone then batch_run(gone, 'ZREM') end
if #kept > 0 then
  local t = int(math.ceil((t_now + keep) / RETIRE_QUANTUM) * RETIRE_QUANTUM)
  -- A new bucket (the list is just these) joins the index.
  if call('RPUSH', done_key(t), unpack(kept)) == #kept then call('ZADD', K_DONE, t, t) end
end
return out
