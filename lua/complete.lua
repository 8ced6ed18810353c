-- complete: settle leased jobs, each as done or as failed, in the order
-- given (the completions and fails that arrive together are coalesced into
-- one call).
-- flags: allow-oom (it runs while Redis is out of memory; scripts/embed_lua.py)
-- KEYS:  none read (lib.lua builds every key from ARGV[1]).
-- ARGV:  1 prefix, 2 retention_ms (how long a completed row is kept so a
--        re-sent id is still a duplicate; 0 deletes it at once), then items:
--        a completion is a pair (job id, lease token); a fail is six
--        ('fail', job id, lease token, error text, retry_ms, dead), where
--        retry_ms -1 = exponential backoff (1 s * 2^(attempt-1), capped at
--        1 h), 0 = back to its lane at once, else due in retry_ms; dead '1'
--        = dead-letter now. A job id starts with JOB, so 'fail' is no id.
-- A kept row goes into the retention bucket of the second at or after now
-- + retention_ms, one RPUSH for the call's completions (lib.lua:retire).
-- Returns one status per item: for a completion 'completed', for a fail the
-- job's new state ('delayed', 'pending' or 'dead'); for either 'ENOJOB'
-- (no such job) or 'ELEASE' (not active, or the token is stale: nothing
-- changed). Re-sending a completion that already succeeded (same token;
-- e.g. after the reply was lost) answers 'completed' again and changes
-- nothing: the completed row keeps its last token for exactly this.
-- Errors (the whole call, before any item takes effect): EARG.
local argv, n = ARGV, #ARGV -- locals: a call carries up to 128 items
local keep = tonumber(argv[2])
if not keep or keep < 0 or n < 4 then
  return redis.error_reply('EARG retention_ms and items expected')
end
-- Check every item's shape first: a malformed call changes nothing.
local i = 3
while i <= n do
  if argv[i] == 'fail' then
    local retry = tonumber(argv[i + 4])
    if i + 5 > n or not retry or retry < -1 or retry >= 2 ^ 52 or retry ~= math.floor(retry) then
      return redis.error_reply('EARG a fail item needs a job, a lease, an error, retry_ms >= -1 ' ..
                               'and dead')
    end
    i = i + 6
  else
    i = i + 2
  end
end
if i ~= n + 1 then return redis.error_reply('EARG a completion needs a job and a lease') end
local t_now = now_ms()
local now = int(t_now)
local out, kept = {}, {}
-- With no lane setting no permit is given back, so the call's settled
-- jobs, completed or failed, leave the lease indexes together (lib.lua:
-- batch_run) at its end. A fail moves its job at once; it reads no lease
-- index then either (with no setting, settings() answers none and no
-- ceiling is counted), so holding those ZREMs back changes nothing it
-- sees: the call's effects are those of its items, one after another, in
-- order.
if any_limit == nil then any_limit = call('EXISTS', K_GLIMIT) == 1 end
local gone = not any_limit and batch_new()

-- A failed job goes back to its lane (retry_ms 0), to the delayed set, or
-- to the dead set when its attempts are spent or it is dead-lettered.
local function fail(id, tok, reason, retry, dead)
  -- The attempts come with the lease check: one read of the row.
  local g, f = check_lease(id, tok, 'attempts', 'max_attempts')
  if not g then return f end
  if gone then
    batch_put(gone, g, id)
  else
    leave_active(id, g)
  end
  local row = row_key(id)
  local att, max = tonumber(f[4]), tonumber(f[5])
  if dead or (max > 0 and att >= max) then
    call('HDEL', row, 'lease', 'lease_until')
    call('HSET', row, 'state', 'dead', 'error', reason, 'finished_ms', now)
    call('ZADD', K_DEAD, now, id)
    return 'dead'
  end
  if retry == -1 then retry = math.min(1000 * 2 ^ math.min(att - 1, 22), 3600000) end
  if retry == 0 then return requeue(id, g, reason, t_now, att, max) end
  call('HDEL', row, 'lease', 'lease_until')
  call('HSET', row, 'state', 'delayed', 'error', reason)
  to_delayed(id, g, int(t_now + retry))
  return 'delayed'
end

i = 3
while i <= n do
  local id, tok = argv[i], argv[i + 1]
  if id == 'fail' then
    out[#out + 1] = fail(tok, argv[i + 2], argv[i + 3], tonumber(argv[i + 4]), argv[i + 5] == '1')
    i = i + 6
  else
    i = i + 2
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
        -- overwritten with '' in the same call as the state (an HDEL would
        -- be one more call per job). The views read an empty payload as
        -- absent (lib.lua:row_view).
        call('HSET', row, 'state', 'completed', 'finished_ms', now, 'payload', '')
        kept[#kept + 1] = id
      end
      out[#out + 1] = 'completed'
    end
  end
end
if gone then batch_run(gone, 'ZREM') end
if #kept > 0 then
  local t = int(math.ceil((t_now + keep) / RETIRE_QUANTUM) * RETIRE_QUANTUM)
  -- A new bucket (the list is just these) joins the index.
  if call('RPUSH', done_key(t), unpack(kept)) == #kept then call('ZADD', K_DONE, t, t) end
end
return out
