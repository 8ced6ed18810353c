-- release: give leased jobs back at once (their connection closed, or a
-- flags: allow-oom (it runs while Redis is out of memory; scripts/embed_lua.py)
-- worker is shutting down). The attempt stays counted: a job whose attempts
-- are spent goes to the dead set instead of its lane. Mode 'undelivered'
-- is for leases the daemon took for a consumer that was gone before it got
-- them (a parked claim that timed out while its claim was in flight): no
-- one saw the job, so the attempt is given back and no error is recorded.
-- KEYS:  the standard ten (lib.lua).
-- ARGV:  1 prefix, 2 reason (recorded as the row's error), 3 mode
--        ('delivered' or 'undelivered'), then pairs (job id, lease token).
-- Returns one status per pair: 'pending', 'dead', 'ENOJOB' or 'ELEASE'.
if #ARGV < 5 or #ARGV % 2 ~= 1 then
  return redis.error_reply('EARG reason, mode and (job, lease) pairs expected')
end
local undelivered = ARGV[3] == 'undelivered'
if not undelivered and ARGV[3] ~= 'delivered' then
  return redis.error_reply('EARG mode must be delivered or undelivered')
end
local now = now_ms()
local out = {}
for i = 4, #ARGV, 2 do
  local id = ARGV[i]
  local g, err = check_lease(id, ARGV[i + 1])
  if not g then
    out[#out + 1] = err
  elseif undelivered then
    out[#out + 1] = give_back(id, g, now)
  else
    leave_active(id, g)
    out[#out + 1] = requeue(id, g, ARGV[2], now)
  end
end
return out
