-- release: give leased jobs back at once (their connection closed, or a
-- worker is shutting down). The attempt stays counted: a job whose attempts
-- are spent goes to the dead set instead of its lane.
-- KEYS:  the standard eleven (lib.lua).
-- ARGV:  1 prefix, 2 reason (recorded as the row's error), then pairs
--        (job id, lease token).
-- Returns one status per pair: 'pending', 'dead', 'ENOJOB' or 'ELEASE'.
if #ARGV < 4 or #ARGV % 2 ~= 0 then
  return redis.error_reply('EARG reason and (job, lease) pairs expected')
end
local now = now_ms()
local out = {}
for i = 3, #ARGV, 2 do
  local id = ARGV[i]
  local g, err = check_lease(id, ARGV[i + 1])
  if not g then
    out[#out + 1] = err
  else
    leave_active(id, g)
    out[#out + 1] = requeue(id, g, ARGV[2], now)
  end
end
return out
