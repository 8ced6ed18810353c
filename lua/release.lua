-- release: give leased jobs back at once.
-- flags: allow-oom (it runs while Redis is out of memory; scripts/embed_lua.py)
-- Three modes, by what became of the attempt:
--   'delivered'    the holder went away (its connection closed): the attempt
--                  stays counted, reason becomes the row's error, and a job
--                  whose attempts are spent goes to the dead set;
--   'returned'     the holder gave it back on purpose (the release op, e.g.
--                  a worker stopping): the attempt is returned and reason
--                  recorded, so a rolling deploy never dead-letters a job;
--   'undelivered'  the daemon took the lease for a consumer that was gone
--                  before it got it: nobody saw the job, so the attempt is
--                  returned and no error is recorded.
-- KEYS:  none read (lib.lua builds every key from ARGV[1]).
-- ARGV:  1 prefix, 2 reason, 3 mode, then pairs (job id, lease token).
-- Returns one status per pair: 'pending', 'dead', 'ENOJOB' or 'ELEASE'.
if #ARGV < 5 or #ARGV % 2 ~= 1 then
  return redis.error_reply('EARG reason, mode and (job, lease) pairs expected')
end
local mode = ARGV[3]
if mode ~= 'delivered' and mode ~= 'returned' and mode ~= 'undelivered' then
  return redis.error_reply('EARG mode must be delivered, returned or undelivered')
end
local now = now_ms()
local out = {}
for i = 4, #ARGV, 2 do
  local id = ARGV[i]
  local g, err = check_lease(id, ARGV[i + 1])
  if not g then
    out[#out + 1] = err
  elseif mode == 'undelivered' then
    out[#out + 1] = give_back(id, g, now)
  elseif mode == 'returned' then
    out[#out + 1] = give_back(id, g, now, ARGV[2])
  else
    leave_active(id, g)
    out[#out + 1] = requeue(id, g, ARGV[2], now)
  end
end
return out
