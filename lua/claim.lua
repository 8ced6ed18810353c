-- claim: lease up to n jobs from the ring, one lane head per turn.
-- flags: allow-oom (it runs while Redis is out of memory; scripts/embed_lua.py)
-- KEYS:  the standard ten (lib.lua).
-- ARGV:  1 prefix, 2 n (>= 1), 3 lease_ms (>= 1), 4 waits (optional: '1'
--        adds each job's wait as a sixth field), 5 max_bytes (optional,
--        0 = none: stop once the payloads served add up to this many
--        bytes, so a reply stays near it: at most max_bytes plus one
--        payload)
-- Returns {deadline, id, group, payload, attempt, token, id, ...}: the
-- deadline (server ms) shared by the batch, then five fields per job, in
-- the order served; with waits, six: {..., token, wait_ms, id, ...}, where
-- wait_ms is how long the job waited since it last became claimable (see
-- lease() in lib.lua). Only {deadline} when nothing is serviceable.
--
-- Each turn is LMOVE ring ring LEFT RIGHT: the lane at the head goes to the
-- tail and its head job is leased. If that left the lane empty or at its
-- ceiling, the lane is the tail and RPOP removes it: O(1), no ring scan.
-- Every turn either serves a job or removes a lane, so the loop ends.
local n, lease_ms = tonumber(ARGV[2]), tonumber(ARGV[3])
if not n or n < 1 or not lease_ms or lease_ms < 1 then
  return redis.error_reply('EARG count and lease_ms must be positive')
end
local width = ARGV[4] == '1' and 6 or 5
local max_bytes = tonumber(ARGV[5] or '0') or 0
local by = ARGV[6]
local bytes = 0
local now = now_ms()
local deadline = now + lease_ms
local dl = int(deadline)
local out = {deadline}
if call('LLEN', K_RING) == 0 then return out end
local tok = call('INCRBY', K_SEQ, int(n)) - n
local served = 0
while served < n do
  local g = call('LMOVE', K_RING, K_RING, 'LEFT', 'RIGHT')
  if not g then break end
  local lane = lane_key(g)
  local head = call('ZPOPMIN', lane)
  if #head == 0 then
    -- An empty lane on the ring breaks the ring rule; heal it and go on.
    call('RPOP', K_RING)
  else
    local id = head[1]
    served = served + 1
    local job = lease(id, g, dl, token(tok + served, now), now, by)
    for i = 1, width do out[#out + 1] = job[i] end
    local lim = glimit(g)
    if (lim ~= nil and gactive(g) >= lim) or call('ZCARD', lane) == 0 then
      call('RPOP', K_RING)
    end
    bytes = bytes + #job[3]
    if max_bytes > 0 and bytes >= max_bytes then break end
  end
end
return out
