-- enqueue: admit one job, idempotently.
-- KEYS:  none read (lib.lua builds every key from ARGV[1]).
-- ARGV:  1 prefix, 2 job id, 3 group ('' = flat), 4 payload (JSON text),
--        5 delay_ms (0 = now), 6 max_attempts (0 = unlimited),
--        7 handoff lease_ms (optional; > 0: the caller has a consumer
--        parked and the job may be leased to it at once, see may_hand()),
--        8 tag (optional, with 7: the daemon's tag for this call, the
--        lease's lease_by as for claim; see recover.lua)
-- Returns 1 (enqueued) or 0 (duplicate: a row exists, nothing changed),
-- {-1, cap, from} (refused: the group's lane holds its cap of pending and
-- delayed jobs, lib.lua cap_refuses; nothing was written), or
-- when the job was handed off, {1, deadline, id, group, payload, attempt,
-- token}: enqueued and already leased, the job fields as claim returns.
-- Errors: EKIND (id not JOB-namespaced), EARG (malformed id or number),
--         EBRAND (malformed group).

-- Hand the job to a consumer the calling daemon has parked, on a lease of
-- lease_ms, when a claim would serve this job next anyway: nothing else
-- is serviceable (the ring is empty; for a flat job, the flat set is) and
-- its group may run it now (its lane is empty, so the job would be the
-- head; not paused; under its ceiling; no rate). The job then never
-- touches the lane or the ring, and no wake is sent: there is nothing
-- left for anyone else to claim. may_hand() only reads, so it is asked
-- before the row is admitted, and the row is written leased at once
-- (admit_row's leased): one HSETNX and one HSET, no read back.
local function may_hand(g)
  if g == '' then return call('ZCARD', K_PENDING) == 0 end
  if call('LLEN', K_RING) > 0 or call('ZCARD', lane_key(g)) > 0 then return false end
  memos() -- paused() here, settings() below and admit_row's cap: one read of both
  if paused(g) then return false end
  -- A group with a rate is never handed off: its lease must enter the
  -- rate's window, which the claim keeps. Nor during a re-place walk:
  -- lanes set aside in an old ring are waiting to be served, though the
  -- live ring may be empty.
  local lim, rated = settings(g)
  return not (rated or walking or (lim ~= nil and gactive(g) >= lim))
end

local id, g, payload = ARGV[2], ARGV[3], ARGV[4]
local hand = tonumber(ARGV[7] or '0')
if not hand or hand < 0 then return redis.error_reply('EARG lease_ms must be non-negative') end
local now = now_ms()
local leased = nil
if hand > 0 and tonumber(ARGV[5]) == 0 and may_hand(g) then
  leased = {dl = int(now + hand), by = ARGV[8]}
end
local st, err, cap_from = admit_row(id, g, payload, ARGV[5], ARGV[6], now, nil, nil, leased)
if st == 'full' then return {-1, err, cap_from} end
if err then return redis.error_reply(err) end
if st == 'duplicate' then return 0 end
if st == 'delayed' then return 1 end
if st == 'leased' then
  call('ZADD', K_ACTIVE, leased.dl, id)
  if g ~= '' then
    call('ZADD', lane_active_key(g), leased.dl, id)
    call('SADD', K_GROUPS, g)
  end
  return {1, now + hand, id, g, payload, 1, leased.tok}
end
to_backlog(id, g)
return 1
