-- lib.lua: the lane rules every script uses, in one place. It heads the
-- Redis Functions library that scripts/embed_lua.py builds from lua/: this
-- file once, then each script as a function of that library, loaded into
-- Redis once (FUNCTION LOAD) and called with FCALL.
--
-- The queue's ten fixed keys, in the order of daemon/store/keys.h's enum
-- key_id (a unit test keeps the two in step). Each is built here from the
-- prefix ARGV[1] (K_RING = PFX .. 'ring', ...), not passed in KEYS: Redis
-- spends about 1,300 instructions a call on each declared key.
--   1 ring      list  the serviceable lanes, each at most once
--   2 glimit    hash  the lane settings: G -> G's ceiling (absent = none),
--                     w:G -> G's weight (1..1000, absent = 1), weighted ->
--                     how many w: fields there are (absent = none), turn ->
--                     "G:used" while the ring head G is part-way through a
--                     weighted turn (see the claim, lua/claim.lua); r:G ->
--                     G's rate "N:P" (at most N leases per P ms), t:G ->
--                     the time (ms) from which G's rate window has room
--                     again (set when a lease fills it: G may be leased
--                     again once the clock reaches it); d:limit,
--                     d:weight, d:rate -> the queue-wide defaults, which
--                     apply to every group without a setting of its own
--                     (read lazily, in the same HMGET as the group's own
--                     setting: a default costs no pass over the groups
--                     and no extra call per job); c:G -> G's cap (the
--                     most pending + delayed jobs its lane admits),
--                     d:cap -> the queue-wide default cap. Group ids start with
--                     three capitals and hold no ':', so no group can
--                     name the other fields.
--   3 paused    set   paused groups
--   4 active    zset  job -> lease deadline (ms, server clock)
--   5 delayed   zset  job -> due time (ms, server clock)
--   6 dead      zset  job -> time it died
--   7 pending   zset  the flat (ungrouped) backlog, score 0
--   8 wake      list  wake tokens for parked consumers; also a pub/sub channel
--   9 seq       string  the lease-token counter
--  10 groups    set   every group whose lane may be non-empty (a superset)
-- KEYS is empty, but on a Redis Cluster: there emqd declares the ten, and
-- an eleventh, emq:{q}:guard, which no script may touch and nothing
-- writes: absent while the queue's slot migrates, it makes Redis refuse
-- the call before it runs (TRYAGAIN), so no script meets a row or lane
-- half moved (docs/ARCHITECTURE.md 7.3). No script reads KEYS.
-- Per group G (built from the prefix): g:<G>:pending, the lane (zset, score
-- 0, mint order), g:<G>:active, G's leases (zset, score = deadline), and
-- g:<G>:delayed, G's delayed jobs (zset, score = due time, the same as in
-- delayed): the lane's share of the delayed set, kept so that the cap rule
-- can count what a lane holds in O(1) (see cap_refuses), and
-- g:<G>:window, G's rate window (list, oldest first, only while a rate
-- applies to G): its leases of the last P ms as entries "t:c:cum", c
-- leases at time t (ms) and cum the running total of leases the list has
-- counted, so that the window's count is the tail's cum minus the head's
-- plus the head's c, from two reads (see window_lease).
-- Also built from the prefix, beyond the ten: throttled (zset), the lanes
-- off the ring only for their rate -> when they may be leased again (the
-- due-time index promote.lua empties, as it does delayed); done:<t>
-- (list), the ids of the completed rows to delete at time t (ms, a whole
-- second: the retention's buckets, see retire), and done (zset), those
-- buckets' t -> t.
-- gactive[G], the in-flight count of the ceiling rule, is ZCARD of
-- g:<G>:active: that index holds exactly G's active jobs, so keeping a
-- separate counter hash would be a second copy to keep equal (and, with
-- many one-job tenants, a hash field created and deleted per job).
-- ARGV[1] is the key prefix "emq:{q}:"; per-job and per-lane keys are built
-- from it and share the {q} hash tag, so a script stays inside one slot.
--
-- Ring rule (ARCHITECTURE invariant 2): G is on the ring exactly when its
-- lane is non-empty, G is not paused, gactive[G] < glimit[G] and G is not
-- throttled (in the throttled index, or a rate and t:G in the future).
-- The hot paths keep it with O(1) transition checks; admin moves use
-- reconcile(). Rate rule (invariant 7): a group that is off the ring only
-- because its t:G is in the future is in the throttled index, due at t:G.
-- Turn rule (invariant 6): glimit's turn field, when present, names the
-- ring head G and a count 1 <= used < weight[G]; it is absent when no
-- group has a weight.
-- luacheck: push ignore 211 231 (a definition, or a memo begin() resets, that a script does not use)
-- The call's prefix ARGV[1] and the queue's key names built from it, and
-- redis.call: set by begin() (at the end of this file) as each call
-- starts. The library is loaded once (scripts/embed_lua.py), so these are
-- the library's own variables, shared by every call: none may carry a
-- value from one call into the next except where begin() says so.
local PFX
local K_RING, K_GLIMIT, K_PAUSED, K_ACTIVE, K_DELAYED, K_DEAD, K_PENDING
local K_WAKE, K_SEQ, K_GROUPS, K_THROTTLED, K_DONE, K_ON
local call

-- Milliseconds on the Redis server's clock: every deadline is on this clock,
-- so daemons with skewed clocks still agree on when a lease runs out.
local function now_ms()
  local t = call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- A whole number as a command argument. redis.call formats a Lua number
-- argument with "%.17g", whose floating-point path (__printf_fp and its
-- multi-precision helpers) was ~7 % of Redis' CPU in a drain profile, at
-- several numbers per job; "%d" is the integer path, a fraction of that.
-- A constant is written as a string for the same reason: the literal 0 in
-- a lane's ZADD cost ~1.7k instructions per enqueued job to format.
local function int(n) return string.format('%d', n) end

-- int(n) for a number that repeats from one item of a call to the next
-- (an enqueue_many's max_attempts, usually the daemon's default for all
-- of them; a claim's attempt numbers, mostly 1): formatted once for as
-- long as it does not change.
local int_last_n, int_last_s = nil, nil
local function int_again(n)
  if n ~= int_last_n then int_last_n, int_last_s = n, int(n) end
  return int_last_s
end

-- tonumber(s) for a text that repeats from one item of a call to the next
-- (an enqueue_many's max_attempts): parsed once for as long as it does
-- not change (int_again's converse).
local num_last_s, num_last_n = nil, nil
local function num_again(s)
  if s ~= num_last_s or s == nil then num_last_s, num_last_n = s, tonumber(s) end
  return num_last_n
end

local function row_key(id) return PFX .. 'job:' .. id end

-- A job's row as the views show it (job.lua, peek.lua): HGETALL's fields
-- but a completed row's freed payload ('') and any stored lease_until;
-- then attempts 0 when the row has no attempts field (a job never leased:
-- enqueue writes none); then, while the job is active, lease_until from
-- its score in the active index. A lease's deadline is kept there only
-- (and in its lane's lease index): the row does not repeat it, which
-- saved a field in every lease's and every completion's HSET. Rows an
-- older emqd wrote may hold one, stale once the lease ended: it is never
-- shown.
local function row_view(id)
  local row = call('HGETALL', row_key(id))
  local out, active, attempts = {}, false, false
  for i = 1, #row, 2 do
    local f, v = row[i], row[i + 1]
    if f == 'state' and v == 'active' then active = true end
    if f == 'attempts' then attempts = true end
    if f ~= 'lease_until' and (f ~= 'payload' or v ~= '') then
      out[#out + 1] = f
      out[#out + 1] = v
    end
  end
  if #row > 0 and not attempts then
    out[#out + 1] = 'attempts'
    out[#out + 1] = '0'
  end
  local dl = active and call('ZSCORE', K_ACTIVE, id)
  if dl then
    out[#out + 1] = 'lease_until'
    out[#out + 1] = dl
  end
  return out
end

local function lane_key(g) return PFX .. 'g:' .. g .. ':pending' end
local function lane_active_key(g) return PFX .. 'g:' .. g .. ':active' end
local function lane_delayed_key(g) return PFX .. 'g:' .. g .. ':delayed' end
local function lane_window_key(g) return PFX .. 'g:' .. g .. ':window' end
local function done_key(t) return PFX .. 'done:' .. t end

-- Retention. A completed row is kept retention_ms so that a re-sent id is
-- still a duplicate, then deleted. A PEXPIRE per row did that at a price
-- paid on every job: the call itself, and with the rows' TTLs in Redis's
-- expires table every key lookup of every command looked there too
-- (tests/bench/RESULTS.md: ~9.7k of a drained job's ~147k Redis
-- instructions), then the active expiry's sampling. Instead a complete
-- call pushes the ids it completes, in one RPUSH, into the bucket of the
-- second at or after now + retention (done:<t>), and retire() deletes the
-- rows of the buckets that are due, from promote.lua (the upkeep timer
-- wakes for the next one): a row is kept at least its retention, and at
-- most about a second and an upkeep pass longer.
local RETIRE_QUANTUM = 1000

-- Delete the rows of the retention buckets due at now (all of them with
-- all), at most max rows; returns how many (max: some may be left).
-- A bucket holds only ids of completed rows: a row, once completed, is
-- never written again until it is deleted (an enqueue of its id is a
-- duplicate; drain, remove and dead purge touch only other states).
local function retire(now, max, all)
  local n, upto = 0, all and '+inf' or int(now)
  while n < max do
    local first = call('ZRANGE', K_DONE, '-inf', upto, 'BYSCORE', 'LIMIT', '0', '1')
    if #first == 0 then return n end
    local key = done_key(first[1])
    -- At most 1000 a pass: unpack's bound is Lua's C stack (8000).
    local ids = call('LPOP', key, int(math.min(max - n, 1000)))
    if ids then
      local rows = {}
      for i, id in ipairs(ids) do rows[i] = row_key(id) end
      call('UNLINK', unpack(rows))
      n = n + #ids
    end
    if call('EXISTS', key) == 0 then call('ZREM', K_DONE, first[1]) end
  end
  return n
end

-- Wake parked consumers: a bounded token list for BLPOP-style waiters and a
-- sharded publish (its channel is in the queue's slot) so every daemon
-- subscribed on this queue's node hears it.
local function wake()
  call('LPUSH', K_WAKE, '1')
  call('LTRIM', K_WAKE, '0', '63')
  call('SPUBLISH', K_WAKE, PFX)
end

local function gactive(g)
  return call('ZCARD', lane_active_key(g))
end

-- Most queues have no ceiling and no paused group at all. Whether they do is
-- read once per script call (on first use), so a claim or complete of a
-- batch asks per job only when there is something to find. Scripts that
-- change glimit or paused (limit, pause, resume) change it before they read
-- either, so the memo never holds a value from before the change.
local any_limit, any_paused = nil, nil

-- g's ceiling: its own, else the queue's default (nil: none).
local function glimit(g)
  if any_limit == nil then any_limit = call('EXISTS', K_GLIMIT) == 1 end
  if not any_limit then return nil end
  local f = call('HMGET', K_GLIMIT, g, 'd:limit')
  return tonumber(f[1] or f[2] or '')
end

local function paused(g)
  if any_paused == nil then any_paused = call('EXISTS', K_PAUSED) == 1 end
  return any_paused and call('SISMEMBER', K_PAUSED, g) == 1
end

-- Both memos in one call, for a script that will likely ask both: an
-- enqueue asks the cap's setting for its group, then, when its job opens
-- the lane, whether the group is paused (the hand-off asks the same two
-- first). One EXISTS of both keys answers both when it counts 0 or 2
-- (most queues have neither); 1 needs one more to say which. So a queue
-- with no setting pays one call where it paid two, and one with a
-- setting pays at most the two it paid. Only when neither is known: a
-- memo already read is not read again. The rule of the memos above holds
-- for both at once: its callers (cap_refuses, enqueue.lua's may_hand)
-- run in scripts that write neither glimit nor paused.
local function memos()
  if any_limit ~= nil or any_paused ~= nil then return end
  local n = call('EXISTS', K_GLIMIT, K_PAUSED)
  if n == 1 then
    any_limit = call('EXISTS', K_GLIMIT) == 1
    any_paused = not any_limit
  else
    any_limit, any_paused = n == 2, n == 2
  end
end

-- The server clock, read once per script call and only when a rate needs
-- it (a script runs atomically, so one reading serves it all).
local clock_ms = nil
local function clock()
  if not clock_ms then clock_ms = now_ms() end
  return clock_ms
end

-- A rate field's value "N:P" as N and P (nil: no rate, or not a valid one).
local function rate_of(r)
  local n, per = string.match(r or '', '^(%d+):(%d+)$')
  n, per = tonumber(n), tonumber(per)
  if not n or not per or n < 1 or per < 1 then return nil end
  return n, per
end

-- A window entry "t:c:cum" (see window_lease) as numbers.
local function window_entry(e)
  local t, c, cum = string.match(e, '^(%d+):(%d+):(%d+)$')
  return tonumber(t), tonumber(c), tonumber(cum)
end

-- When g's window, under its rate r, has room again (nil: it has now), read
-- without changing anything (so check.lua can use it too): O(window).
local function rate_due_now(g, r)
  local n, per = rate_of(r)
  local now, live = clock(), {}
  local count = 0
  for _, e in ipairs(call('LRANGE', lane_window_key(g), 0, -1)) do
    local t, c = window_entry(e)
    if t + per > now then
      live[#live + 1] = {t, c}
      count = count + c
    end
  end
  if count < n then return nil end
  for _, e in ipairs(live) do
    count = count - e[2]
    if count < n then return e[1] + per end
  end
end

-- The re-place walk in progress, if any (glimit's replacing field, see
-- replace_begin): read with every settings() and used by ring_push, so a
-- lane that a hot path puts on the ring during a walk is known to be there.
local walking = nil

-- g's ceiling and rate in one read, each its own or else the queue's
-- default: lim (nil: none), the rate's "N:P" (nil: no rate) and t:G
-- (nil: its window has never been full).
local function settings(g)
  if any_limit == nil then any_limit = call('EXISTS', K_GLIMIT) == 1 end
  if not any_limit then return nil end
  local f = call('HMGET', K_GLIMIT, g, 'r:' .. g, 't:' .. g, 'd:limit', 'd:rate', 'replacing')
  local r = f[2] or f[5]
  if not rate_of(r) then r = nil end
  walking = f[6]
  local tat = tonumber(f[3] or '')
  -- While a walk re-places lanes for a changed default rate, t:G may still
  -- be the old rate's: the window says what the rate in force allows.
  if r and walking and string.find(walking, 'r', 1, true) then tat = rate_due_now(g, r) end
  return tonumber(f[1] or f[4] or ''), r, tat
end

-- Put g on the ring, waking parked consumers only when the ring was empty.
-- A consumer parks only after a claim that emptied the ring (a claim stops
-- short of its count only then), and scripts run one at a time, so a lane
-- joining a non-empty ring has no one to wake: the ring being non-empty
-- means its first lane already woke them. With many one-job tenants this
-- saves the LPUSH, LTRIM and SPUBLISH (and a daemon-side pump) per job.
local function ring_push(g)
  if call('RPUSH', K_RING, g) == 1 then wake() end
  if walking then call('SADD', K_ON, g) end
end

-- g, off the ring only for its rate, waits in the throttled index until
-- due (ms). The daemons learn of a new earliest due time from a "due:<ms
-- from now>" message on the wake channel (their upkeep timers wake then to
-- run promote); a later one they learn from promote's answer.
local function throttle(g, due)
  call('ZADD', K_THROTTLED, due, g)
  local first = call('ZRANGE', K_THROTTLED, '0', '0')
  if first[1] == g then
    call('SPUBLISH', K_WAKE, 'due:' .. int(math.max(0, math.ceil(due - clock()))))
  end
end

-- The rate window (g:<G>:window). A rate of N per P ms is a sliding
-- window: a lease is allowed while fewer than N of the group's leases are
-- less than P ms old, so no window of P ms ever holds more than N, and a
-- lane served late (under load a claim reaches it some ms after it may be
-- served) loses only that lateness once per window, not once per lease
-- as spacing the leases P / N apart would (docs/ARCHITECTURE.md, "Rates").
-- Leases in one script call share its clock, so they share an entry; an
-- entry's time is rounded up to a quantum of P / 1024 ms (at least 1), so
-- a window holds at most ~1025 entries whatever N is. Rounding up makes a
-- lease count as later than it was: it leaves the window up to a quantum
-- late, never early, so the bound holds. (window_entry and rate_due_now
-- are defined above, before settings(), which uses the latter.)

-- Drop the entries of g's window that are P ms old at now; returns the
-- head that is left (t, c, cum), or nil when the window is empty. The key
-- expires P ms after its newest entry, so a window left alone goes whole.
local function window_head(win, per, now)
  while true do
    local e = call('LINDEX', win, '0')
    if not e then return nil end
    local t, c, cum = window_entry(e)
    if t + per > now then return t, c, cum end
    call('LPOP', win)
  end
end

-- g's window (key win) at now, once what is P ms old is dropped: its head
-- (t, c), the count of leases in it and its tail (t, c, cum); nil when it
-- is empty.
local function window_read(win, per, now)
  local ht, hc, hcum = window_head(win, per, now)
  if not ht then return nil end
  local tt, tc, tcum = window_entry(call('LINDEX', win, '-1'))
  return ht, hc, tcum - hcum + hc, tt, tc, tcum
end

-- A window holding count leases against a rate of n (count >= n): the
-- time from which it has room again, when enough of its oldest entries
-- have left it that fewer than n remain (head: its first entry's t, c).
local function window_due(win, count, n, per, ht, hc)
  if count - hc < n then return ht + per end
  local freed = 0
  for _, e in ipairs(call('LRANGE', win, '0', '-1')) do
    local t, c = window_entry(e)
    freed = freed + c
    if count - freed < n then return t + per end
  end
  return now_ms() + per -- unreachable: count is the entries' sum
end

-- Record one lease of g at now under its rate r ("N:P") and return the
-- time from which its window has room again if this lease filled it, else
-- nil. Three or four calls: the head and tail reads, then a write to the
-- tail (and the key's expiry when the entry is new).
local function window_lease(g, r, now)
  local n, per = rate_of(r)
  local win = lane_window_key(g)
  local q = math.max(1, math.ceil(per / 1024))
  local at = math.ceil(now / q) * q
  local ht, hc, count, tt, tc, tcum = window_read(win, per, now)
  if not ht then
    ht, hc, count, tt, tc, tcum = at, 0, 0, nil, 0, 0
  end
  count = count + 1
  if tt and tt >= at then -- the same quantum (or a later one, kept from a longer P)
    call('LSET', win, '-1', int(tt) .. ':' .. int(tc + 1) .. ':' .. int(tcum + 1))
    if tt == ht then hc = hc + 1 end -- the head is the tail
  else
    call('RPUSH', win, int(at) .. ':1:' .. int(tcum + 1))
    call('PEXPIREAT', win, int(at + per))
    if not tt then hc = 1 end -- the window was empty: the head is this entry
  end
  if count < n then return nil end
  return window_due(win, count, n, per, ht, hc)
end

-- g's rate changed (its own, or the queue default it follows): re-read its
-- window under the rate that applies now, so t:G says when the new rate
-- allows its next lease, and take it out of the throttled index (the
-- caller puts it where the ring rule now does). No rate left: the window
-- and t:G go. O(window), an admin move.
local function rate_recheck(g)
  call('ZREM', K_THROTTLED, g)
  local _, r = settings(g)
  local win = lane_window_key(g)
  if not r then
    call('DEL', win)
    call('HDEL', K_GLIMIT, 't:' .. g)
    return
  end
  local _, per = rate_of(r)
  local tail = call('LINDEX', win, '-1')
  -- The key must live P ms past its newest entry under the new P too (an
  -- entry already P ms old makes it go at once).
  if tail then call('PEXPIREAT', win, int(window_entry(tail) + per)) end
  local due = rate_due_now(g, r)
  if due then
    call('HSET', K_GLIMIT, 't:' .. g, int(due))
  else
    call('HDEL', K_GLIMIT, 't:' .. g)
  end
end

-- Where the ring rule puts g (O(1)): 'ring' when serviceable; 'wait' and
-- its due time when it is serviceable but for its rate and not yet in the
-- throttled index; nil otherwise (a lane in the index waits there).
local function placement(g)
  if call('ZCARD', lane_key(g)) == 0 or paused(g) then return nil end
  local lim, rated, tat = settings(g)
  if lim ~= nil and gactive(g) >= lim then return nil end
  if rated then
    if call('ZSCORE', K_THROTTLED, g) then return nil end
    if tat and tat > clock() then return 'wait', tat end
  end
  return 'ring'
end

local function serviceable(g) return placement(g) == 'ring' end

-- A lane known non-empty, unpaused and under its ceiling (rated and tat
-- from settings()) becomes serviceable: onto the ring, unless its rate
-- holds it (then the index, if it is not there already). O(1).
local function admit(g, rated, tat)
  if rated then
    if call('ZSCORE', K_THROTTLED, g) then return end
    if tat and tat > clock() then return throttle(g, tat) end
  end
  ring_push(g)
end

-- Return the lanes of the throttled index that are due at now (their
-- rate allows a lease again) to where the ring rule puts them, at most
-- max of them; returns how many. promote.lua runs it from the upkeep
-- timer that the "due:" message arms, and claim.lua at every claim of a
-- queue with settings: under load the upkeep's calls queue behind the
-- queue's other calls at Redis, so a lane waiting for them was served
-- well under its rate; a claim, the call that would serve it, finds it
-- due itself. A due lane leaves the index first, so placement() sees it
-- as any other.
local function unthrottle_due(now, max)
  local lanes = call('ZRANGE', K_THROTTLED, '-inf', now, 'BYSCORE', 'LIMIT', '0', int(max))
  for _, g in ipairs(lanes) do
    call('ZREM', K_THROTTLED, g)
    local where, at = placement(g)
    if where == 'ring' then
      ring_push(g)
    elseif where == 'wait' then
      throttle(g, at)
    end
  end
  return #lanes
end

-- The weighted turn in progress, from glimit's turn field: the ring head
-- it names and how many jobs that head has had in it (nil, 0: none).
local function turn_of(t)
  if not t then return nil, 0 end
  local g, used = string.match(t, '^(.+):(%d+)$')
  return g, tonumber(used or '0')
end

-- g leaves the ring by an admin move: a turn it was part-way through is
-- over (the turn rule: the turn names the ring head).
local function end_turn_of(g)
  if any_limit == nil then any_limit = call('EXISTS', K_GLIMIT) == 1 end
  if not any_limit then return end
  local tg = turn_of(call('HGET', K_GLIMIT, 'turn'))
  if tg == g then call('HDEL', K_GLIMIT, 'turn') end
end

-- Admin moves: make g's ring membership match the rule. LPOS/LREM are
-- O(ring); only limit/pause/resume/reassign/drain use this.
local function reconcile(g)
  local where, due = placement(g)
  local want = where == 'ring'
  local on = call('LPOS', K_RING, g)
  if on and not want then
    call('LREM', K_RING, '0', g)
    end_turn_of(g)
  elseif want and not on then
    ring_push(g)
  end
  if where == 'wait' then throttle(g, due) end
end

-- A queue default changed (limit or rate without a group): every lane
-- must go where the ring rule now puts it. Doing that for every group in
-- one script stalled Redis for seconds with 100,000 groups, so it is a
-- walk in bounded steps (replace_step), and the scripts between steps
-- stay right:
-- * replace_begin renames the ring aside as an old ring (O(1)): claims see
--   only the live ring, which from then on holds only lanes placed under
--   the new settings, by the walk or by a hot path reading them fresh (so
--   no lane is leased over a ceiling or rate that a step has not reached
--   yet; a lane still in an old ring waits for its step instead).
-- * ring_push, during a walk, also records the lane in replace:on, so the
--   walk never puts a lane on the ring twice. Each step visits the old
--   rings' lanes first (in their order), then the group registry (SSCAN),
--   and places every lane not in replace:on by the ring rule.
-- * During a walk for a rate, settings() reads the window instead of t:G
--   (rate_due_now), and the walk re-reads each lane's window
--   (rate_recheck) as it visits it.
-- A default changed again during a walk renames the live ring as one more
-- old ring and starts the registry pass again. The walk is glimit's
-- replacing field "kinds:first:last:stage:cursor": kinds 'l' (ceiling)
-- and/or 'r' (rate), old rings ring:old:first..last, stage 'R' (old rings)
-- or 'G' (registry, from SSCAN cursor). promote.lua runs steps too, so a
-- walk whose daemon died is finished by any daemon's upkeep.
local function old_ring_key(n) return PFX .. 'ring:old:' .. n end

local function walk_of(m)
  local kinds, first, last, stage, cur = string.match(m or '', '^(%a+):(%d+):(%d+):(%a):(%d+)$')
  if not kinds then return nil end
  return {kinds = kinds, first = tonumber(first), last = tonumber(last), stage = stage, cur = cur}
end

local function walk_save(w)
  walking = w.kinds .. ':' .. int(w.first) .. ':' .. int(w.last) .. ':' .. w.stage .. ':' .. w.cur
  call('HSET', K_GLIMIT, 'replacing', walking)
end

local function replace_begin(kind)
  local w = walk_of(call('HGET', K_GLIMIT, 'replacing')) or
              {kinds = '', first = 1, last = 0, stage = 'R', cur = '0'}
  if not string.find(w.kinds, kind, 1, true) then w.kinds = w.kinds .. kind end
  if call('EXISTS', K_RING) == 1 then
    w.last = w.last + 1
    call('RENAME', K_RING, old_ring_key(w.last))
  end
  -- What was on the ring is in an old ring now: nothing is known placed.
  -- (The weighted turn names the old head; the step that follows in the
  -- same script puts that head back first, or ends the turn.)
  call('UNLINK', K_ON) -- freed off the main thread: it may hold every lane
  w.stage, w.cur = 'R', '0'
  walk_save(w)
end

-- Place one lane that the walk meets, unless a hot path or an earlier
-- visit has put it on the live ring already; into, if given, collects the
-- lanes to put on the ring instead of pushing them.
local function replace_visit(g, rates, into)
  if call('SISMEMBER', K_ON, g) == 1 then return end
  if rates then rate_recheck(g) end
  local where, due = placement(g)
  if where == 'ring' then
    if into then
      into[#into + 1] = g
    else
      ring_push(g)
    end
  elseif where == 'wait' then
    throttle(g, due)
  end
end

-- A step's end: the weighted turn stays only while it names the ring head.
local function replace_turn()
  local tg = turn_of(call('HGET', K_GLIMIT, 'turn'))
  if tg and call('LINDEX', K_RING, '0') ~= tg then call('HDEL', K_GLIMIT, 'turn') end
end

-- One step of the walk: about budget lanes and groups. Returns true when
-- the walk is over (or there is none).
local function replace_step(budget)
  local m = call('HGET', K_GLIMIT, 'replacing')
  local w = walk_of(m)
  if not w then return true end
  walking = m
  local rates = string.find(w.kinds, 'r', 1, true) ~= nil
  local left = budget
  while w.stage == 'R' and left > 0 do
    if w.first > w.last then
      w.stage, w.cur = 'G', '0'
    else
      local g = call('LPOP', old_ring_key(w.first))
      if g then
        replace_visit(g, rates)
        left = left - 1
      else
        w.first = w.first + 1 -- that old ring is empty, so gone
      end
    end
  end
  -- The registry's lanes join the tail in group-id order within a step
  -- (SSCAN's own order is the hash table's), so a walk of one step is
  -- reproducible.
  local join = {}
  while w.stage == 'G' and left > 0 do
    local r = call('SSCAN', K_GROUPS, w.cur, 'COUNT', int(math.min(left, 1000)))
    for _, g in ipairs(r[2]) do replace_visit(g, rates, join) end
    left = left - math.max(#r[2], 1)
    w.cur = r[1]
    if w.cur == '0' then w.stage = 'E' end
  end
  table.sort(join)
  local seen = {}
  for _, g in ipairs(join) do
    if not seen[g] then ring_push(g) end -- SSCAN may return a member twice
    seen[g] = true
  end
  replace_turn()
  if w.stage == 'E' then
    call('HDEL', K_GLIMIT, 'replacing')
    call('UNLINK', K_ON)
    walking = nil
    return true
  end
  walk_save(w)
  return false
end

-- Put a job (its row already says pending) at its mint-ordered place in its
-- lane, or in the flat set when g is ''. Only an empty -> non-empty lane can
-- change ring membership (a non-empty lane is already placed correctly), so
-- this is O(1) and never scans the ring. seen, when given, is the calling
-- script's record of the lanes (and '' for the flat set) it has put a job
-- in already: a script that only adds to backlogs (enqueue_many, promote,
-- dead retry) knows those are non-empty, so it skips the ZCARD that would
-- say so (one call per job fewer for a batch's later jobs of a group).
local function to_backlog(id, g, seen)
  if g == '' then
    call('ZADD', K_PENDING, '0', id)
    if seen then
      if seen[''] then return end
      seen[''] = true
    end
    if call('ZCARD', K_PENDING) == 1 then wake() end
    return
  end
  local lane = lane_key(g)
  call('ZADD', lane, '0', id)
  if seen then
    if seen[g] then return end
    seen[g] = true
  end
  if call('ZCARD', lane) == 1 then
    call('SADD', K_GROUPS, g)
    if not paused(g) then
      local lim, rated, tat = settings(g)
      if lim == nil or gactive(g) < lim then admit(g, rated, tat) end
    end
  end
end

-- A job of g has left g:<G>:active: its permit is back. The lane was off
-- the ring only for its ceiling exactly when the count falls from the
-- ceiling to one below it, so that is the only case that re-rings (O(1)).
local function release_permit(g)
  local lim, rated, tat = settings(g)
  if lim ~= nil and gactive(g) == lim - 1 and not paused(g)
     and call('ZCARD', lane_key(g)) > 0 then
    admit(g, rated, tat)
  end
end

local function leave_active(id, g)
  call('ZREM', K_ACTIVE, id)
  if g ~= '' then
    call('ZREM', lane_active_key(g), id)
    release_permit(g)
  end
end

-- The lease indexes (active and g:<G>:active) changed for a whole batch
-- at once: a call that leases or settles many jobs adds them with one ZADD
-- (or removes them with one ZREM) per index, instead of one per job per
-- index; a redis.call costs more than the skiplist work it does. Only where
-- nothing reads those indexes before the batch is written: with no lane
-- setting, since a ceiling reads g:<G>:active's size after every lease and
-- after every permit given back. batch_put appends x (and y, when given) to
-- the members for the queue-wide index and for g's; batch_run sends cmd
-- (ZADD or ZREM) to each index with its members, lanes in the order met.
local function batch_new() return {all = {}, lanes = {}, order = {}} end
local function batch_put(b, g, x, y)
  local a = b.all
  a[#a + 1] = x
  if y then a[#a + 1] = y end
  if g ~= '' then
    local l = b.lanes[g]
    if not l then
      l = {}
      b.lanes[g] = l
      b.order[#b.order + 1] = g
    end
    l[#l + 1] = x
    if y then l[#l + 1] = y end
  end
end
local function batch_run(b, cmd)
  if #b.all > 0 then call(cmd, K_ACTIVE, unpack(b.all)) end
  for _, g in ipairs(b.order) do call(cmd, lane_active_key(g), unpack(b.lanes[g])) end
end

-- The fencing token of lease number seq, leased at now (ms): seq and the
-- lease time's low 32 bits, both in hex ("1f-5e2a09c4"). seq alone is
-- unique only while the counter only grows; a store rolled back by a crash
-- (its last writes lost) would count the same numbers again, and a worker
-- from before the crash could settle another's lease with its old token.
-- The same number leased again later carries another time. At most
-- 14 + 1 + 8 = 23 bytes, the wire's bound (seq below 2^56).
local function token(seq, now)
  return string.format('%x-%x', seq, now % 4294967296)
end

-- Lease a job that has just been taken off its backlog. dl is the lease
-- deadline as int() text (one per batch); tok is the fencing token that
-- complete/fail/extend/release must present; now is the caller's now_ms();
-- by is the calling daemon's tag for this call ('' or nil: none), kept as
-- the row's lease_by so that the daemon can give the lease back should the
-- call's reply be lost (recover.lua).
-- Appends to out the job's first width (5 or 6) of {id, group, payload,
-- attempt, token, wait} (straight into the caller's reply: no table per
-- job) and returns the payload's length. wait is the ms the job waited
-- since it last became claimable, its row's ready_ms (set when a delayed
-- job came due or a job was put back) or else its created_ms (a job due
-- at once is claimable from its enqueue); never negative. With later (a
-- batch_new()), the job's entries in the lease indexes are left to the
-- caller's batch_run(later, 'ZADD').
local function lease(id, g, dl, tok, now, by, out, width, later)
  local row = row_key(id)
  local f = call('HMGET', row, 'attempts', 'payload', 'ready_ms', 'created_ms')
  local att = f[1] and tonumber(f[1]) + 1 or 1 -- a first lease's row has no attempts
  call('HSET', row, 'state', 'active', 'attempts', int_again(att), 'lease', tok, 'lease_by',
       by or '')
  if later then
    batch_put(later, g, dl, id)
  else
    call('ZADD', K_ACTIVE, dl, id)
    if g ~= '' then call('ZADD', lane_active_key(g), dl, id) end
  end
  local payload, n = f[2] or '', #out
  out[n + 1], out[n + 2], out[n + 3], out[n + 4], out[n + 5] = id, g, payload, att, tok
  if width == 6 then
    local wait = now - (tonumber(f[3] or f[4] or '') or now)
    out[n + 6] = wait > 0 and wait or 0
  end
  return #payload
end

-- Check a presented lease: returns the row's group, or nil and a status.
-- The row's fields named after tok are read in the same HMGET, and come
-- back second, as the HMGET's reply (theirs from its 4th entry on).
local function check_lease(id, tok, ...)
  local f = call('HMGET', row_key(id), 'state', 'lease', 'group', ...)
  if not f[1] then return nil, 'ENOJOB' end
  if f[1] ~= 'active' or f[2] ~= tok then return nil, 'ELEASE' end
  return f[3] or '', f
end

-- Send a job whose lease ended without success back to its backlog, or to
-- the dead set when its attempts are spent (max_attempts 0 = unlimited).
-- Back in its backlog, it is claimable again from now (ready_ms). att and
-- max: the row's attempts and max_attempts when the caller has read them
-- (else one HMGET here). The row is written with one HSET.
local function requeue(id, g, reason, now, att, max)
  local row = row_key(id)
  if not att then
    local f = call('HMGET', row, 'attempts', 'max_attempts')
    att, max = tonumber(f[1] or '0'), tonumber(f[2] or '0')
  end
  -- (lease_until: only a row an older emqd wrote holds one; row_view.)
  call('HDEL', row, 'lease', 'lease_until')
  local dead = max > 0 and att >= max
  local state, at, ts = 'pending', 'ready_ms', int(now)
  if dead then state, at = 'dead', 'finished_ms' end
  if reason then
    call('HSET', row, 'state', state, at, ts, 'error', reason)
  else
    call('HSET', row, 'state', state, at, ts)
  end
  if dead then
    call('ZADD', K_DEAD, ts, id)
    return 'dead'
  end
  to_backlog(id, g)
  return 'pending'
end

-- Give back a lease with its attempt returned: one nobody saw (its
-- consumer was gone, or the reply that carried it was lost; reason nil,
-- as if never leased), or one its holder returned on purpose (reason
-- recorded). The job leaves the active indexes and returns to its
-- backlog; with the attempt returned it cannot be dead. g is the row's
-- group. Returns what requeue() does.
local function give_back(id, g, now, reason)
  leave_active(id, g)
  local row = row_key(id)
  if tonumber(call('HGET', row, 'attempts') or '0') > 0 then
    call('HINCRBY', row, 'attempts', '-1')
  end
  return requeue(id, g, reason, now)
end

-- A job of group g ('' = flat) enters the delayed set, due at due (ms,
-- int() text), or leaves it. Every move into or out of delayed goes
-- through these two, so g's delayed index holds exactly g's delayed jobs
-- (ARCHITECTURE invariant 8) and the cap rule can count them with ZCARD.
local function to_delayed(id, g, due)
  call('ZADD', K_DELAYED, due, id)
  if g ~= '' then call('ZADD', lane_delayed_key(g), due, id) end
end

local function off_delayed(id, g)
  call('ZREM', K_DELAYED, id)
  if g ~= '' then call('ZREM', lane_delayed_key(g), id) end
end

-- The cap rule (bounded lanes): an enqueue into lane g is refused when g
-- already holds its cap of pending + delayed jobs (its own c:G, else the
-- queue's d:cap). Returns nil (admit) or, refused, the cap and where it
-- comes from ('group' or 'queue'). Whether the queue has any lane
-- setting at all is the EXISTS memo the other settings share (any_limit,
-- read with any_paused's by memos()): read once per script call, so a
-- queue with no setting pays one EXISTS per call, however many jobs the
-- call admits, and to_backlog's settings then reuse it. A queue with
-- settings pays one HMGET per job for the cap; a capped lane, two ZCARDs
-- more. Flat jobs have no lane and no cap.
-- Only admission is bounded: a retry, a promotion, a release or a
-- reassign moves a job already admitted and is never refused.
local function cap_refuses(g)
  if g == '' then return nil end
  memos()
  if any_limit == nil then any_limit = call('EXISTS', K_GLIMIT) == 1 end
  if not any_limit then return nil end
  local f = call('HMGET', K_GLIMIT, 'c:' .. g, 'd:cap')
  local cap = tonumber(f[1] or f[2] or '')
  if not cap then return nil end
  if call('ZCARD', lane_key(g)) + call('ZCARD', lane_delayed_key(g)) < cap then return nil end
  return cap, f[1] and 'group' or 'queue'
end

local function valid_group(g)
  return #g >= 4 and #g <= 67 and string.match(g, '^%u%u%u[%w_%-]+$') ~= nil
end

local function valid_job(id)
  return #id >= 4 and #id <= 67 and string.match(id, '^JOB[%w_%-]+$') ~= nil
end

-- Admit one job's row (enqueue.lua, enqueue_many.lua): check its
-- arguments, refuse a duplicate, write the row and, when it has a delay,
-- put it in the delayed indexes. Returns 'ready' (the row says pending:
-- the caller puts it in its backlog, or hands it off), 'delayed',
-- 'duplicate' (a row exists: nothing changed), 'full' and the cap and
-- where it comes from ('group' or 'queue'; the lane holds its cap:
-- nothing written, see cap_refuses), or nil and an "ECODE message"
-- error. Nothing is written before every check has passed. now: the
-- caller's now_ms(); delay and max: the ARGV text. fresh (enqueue_many):
-- nil, or a table when the caller has found with one EXISTS that none of
-- its items' rows existed before the call; then a row exists only if this
-- call wrote it (fresh[id], which admit_row keeps), and a row is started
-- with one HSET instead of HSETNX + HSET, the same row either way. row:
-- the row's key when the caller has built it already (nil: built here).
-- leased (enqueue.lua's hand-off): nil, or {dl = the deadline as int()
-- text, by = the caller's tag} for a job due now that is leased as it is
-- admitted: its row starts active, on its first attempt, with its lease
-- fields and a token drawn once it is known to be new (set as leased.tok),
-- so the job is written once instead of written pending, then read back
-- (its payload too) and rewritten by lease(); admit_row then returns
-- 'leased', and the caller puts it in the lease indexes. now_s: int(now)
-- when the caller has formatted it once for all its items (nil: here).
local function admit_row(id, g, payload, delay, max, now, fresh, row, leased, now_s)
  if not valid_job(id) then
    if string.sub(id, 1, 3) ~= 'JOB' then return nil, 'EKIND job id must be JOB-namespaced' end
    return nil, 'EARG malformed job id'
  end
  if g ~= '' and not valid_group(g) then return nil, 'EBRAND malformed group id' end
  -- Most jobs are due now, and a call's items share one max_attempts.
  delay = delay == '0' and 0 or tonumber(delay)
  max = num_again(max)
  if not delay or delay < 0 or not max or max < 0 then
    return nil, 'EARG delay_ms and max_attempts must be non-negative'
  end
  if delay > 0 or fresh then leased = nil end
  local state = delay > 0 and 'delayed' or leased and 'active' or 'pending'
  row = row or row_key(id)
  -- A full lane refuses a new job, but not a duplicate: that writes nothing.
  local cap, cap_from = cap_refuses(g)
  if fresh then
    if fresh[id] then return 'duplicate' end
    if cap then return 'full', cap, cap_from end
    fresh[id] = true
  else
    if cap and call('EXISTS', row) == 0 then return 'full', cap, cap_from end
    -- Every row has a state, so setting it only where there is none both
    -- refuses a duplicate and starts the row (one call instead of EXISTS +
    -- HSET; the HSET below writes the state again, the same value).
    if call('HSETNX', row, 'state', state) == 0 then return 'duplicate' end
  end
  now_s = now_s or int(now)
  if leased then
    leased.tok = token(call('INCR', K_SEQ), now)
    call('HSET', row, 'state', state, 'group', g, 'payload', payload, 'attempts', '1',
         'max_attempts', int_again(max), 'created_ms', now_s, 'lease', leased.tok, 'lease_by',
         leased.by or '')
    return 'leased'
  end
  -- No attempts field: absent reads as 0 (lease, requeue and give_back,
  -- the scripts that may meet a job not yet leased, read it `or '0'`, and
  -- row_view shows it), and a field fewer saves ~1.5k instructions a job.
  call('HSET', row, 'state', state, 'group', g, 'payload', payload, 'max_attempts',
       int_again(max), 'created_ms', now_s)
  if delay == 0 then return 'ready' end
  to_delayed(id, g, int(now + delay))
  if g ~= '' then call('SADD', K_GROUPS, g) end
  return 'delayed'
end

-- Run first by every function of the library (scripts/embed_lua.py). The
-- key names of a queue are built on its first call and kept, so a call
-- builds none (~300 instructions a name, when every call built them); a
-- daemon serves few queues, but the table is cleared once it holds 1,024
-- of them, so no run of prefixes grows it without bound. The memos of a
-- call (any_limit, any_paused, clock_ms, walking) start empty: they hold
-- what this call read. int_again's and num_again's are kept: they map a
-- number to its text and a text to its number, true in every call.
local names_of, names_count = {}, 0
local function begin(argv)
  call = redis.call
  local pfx = argv[1]
  if pfx ~= PFX then
    PFX = pfx
    local k = names_of[pfx]
    if k then
      K_RING, K_GLIMIT, K_PAUSED, K_ACTIVE, K_DELAYED = k[1], k[2], k[3], k[4], k[5]
      K_DEAD, K_PENDING, K_WAKE, K_SEQ, K_GROUPS = k[6], k[7], k[8], k[9], k[10]
      K_THROTTLED, K_DONE, K_ON = k[11], k[12], k[13]
    else
      K_RING = pfx .. 'ring'
      K_GLIMIT = pfx .. 'glimit'
      K_PAUSED = pfx .. 'paused'
      K_ACTIVE = pfx .. 'active'
      K_DELAYED = pfx .. 'delayed'
      K_DEAD = pfx .. 'dead'
      K_PENDING = pfx .. 'pending'
      K_WAKE = pfx .. 'wake'
      K_SEQ = pfx .. 'seq'
      K_GROUPS = pfx .. 'groups'
      K_THROTTLED = pfx .. 'throttled'
      K_DONE = pfx .. 'done'
      K_ON = pfx .. 'replace:on'
      if names_count >= 1024 then names_of, names_count = {}, 0 end
      names_of[pfx] = {K_RING, K_GLIMIT, K_PAUSED, K_ACTIVE, K_DELAYED, K_DEAD, K_PENDING,
                       K_WAKE, K_SEQ, K_GROUPS, K_THROTTLED, K_DONE, K_ON}
      names_count = names_count + 1
    end
  end
  any_limit, any_paused, clock_ms, walking = nil, nil, nil, nil
end
-- luacheck: pop
