-- remove: delete one pending or delayed job, keeping its lane and the
-- flags: allow-oom (it only deletes; scripts/embed_lua.py)
-- ring consistent (a lane emptied by it leaves the ring).
-- KEYS:  none read (lib.lua builds every key from ARGV[1]).
-- ARGV:  1 prefix, 2 job id
-- Returns the state the job was in: 'pending' or 'delayed'.
-- Errors: EKIND (not a JOB id), ENOJOB, ESTATE (active: settle or release
-- it; dead: use dead purge; completed: nothing to remove).
local id = ARGV[2]
if not valid_job(id) then return redis.error_reply('EKIND job id must be JOB-namespaced') end
local row = row_key(id)
local f = call('HMGET', row, 'state', 'group')
local state, g = f[1], f[2] or ''
if not state then return redis.error_reply('ENOJOB no such job') end
if state == 'pending' then
  if g == '' then
    call('ZREM', K_PENDING, id)
  else
    call('ZREM', lane_key(g), id)
    reconcile(g) -- O(ring), an admin move: the lane may have emptied
  end
elseif state == 'delayed' then
  off_delayed(id, g)
else
  return redis.error_reply('ESTATE only a pending or delayed job can be removed; it is ' .. state)
end
call('DEL', row)
return state
