-- claim: lease up to n jobs from the ring, one lane head per turn.
-- flags: allow-oom (it runs while Redis is out of memory; scripts/embed_lua.py)
-- KEYS:  none read (lib.lua builds every key from ARGV[1]).
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
-- A queue with no lane setting at all plays the same turns in bulk (see
-- below): per job only the lease's own calls.
--
-- With weights (any w: field in glimit, or a default weight d:weight: a
-- group without its own weight is served the default), a turn is deficit round robin on
-- the ring (docs/ARCHITECTURE.md, "Weighted lanes"): the head lane G is
-- served without moving until it has had weight[G] jobs in this turn, then
-- LMOVE sends it to the tail; a lane that empties or reaches its ceiling
-- is the head, and LPOP removes it. A turn may span claims: glimit's turn
-- field carries "G:used" from one call to the next. Still O(1) per job.
local n, lease_ms = tonumber(ARGV[2]), tonumber(ARGV[3])
if not n or n < 1 or not lease_ms or lease_ms < 1 then
  return redis.error_reply('EARG count and lease_ms must be positive')
end
local width = ARGV[4] == '1' and 6 or 5
local max_bytes = tonumber(ARGV[5] or '0') or 0
local by = ARGV[6]
local bytes = 0
local now = now_ms()
clock_ms = now
local deadline = now + lease_ms
local dl = int(deadline)
local out = {deadline}
-- Rates live in glimit: a queue without it has no throttled lane.
if any_limit == nil then any_limit = call('EXISTS', K_GLIMIT) == 1 end
if any_limit then unthrottle_due(now, 100) end
local ring_len = call('LLEN', K_RING)
if ring_len == 0 then return out end
local tok = call('INCRBY', K_SEQ, int(n)) - n
local served = 0

-- Lease lane g's head job into out; false when the lane was empty.
local lane
local function serve(g)
  lane = lane_key(g) -- spent() reads the same lane next
  local head = call('ZPOPMIN', lane)
  if #head == 0 then return false end
  served = served + 1
  bytes = bytes + lease(head[1], g, dl, token(tok + served, now), now, by, out, width)
  return true
end

-- Whether g, just served, must leave the ring: empty, at its ceiling, or
-- held by its rate. Under a rate r of N per P ms this lease enters g's
-- rate window (lib.lua:window_lease); when it leaves N leases in the last
-- P ms, g may not be leased again until the oldest of them are P ms old
-- (t:G): it leaves the ring, and if that is all that holds it, waits in
-- the throttled index until then. Every lease is counted as it is made,
-- so no batch, however large, takes a lane past its rate.
local function spent(g, lim, r)
  local empty = call('ZCARD', lane) == 0
  local full = lim ~= nil and gactive(g) >= lim
  if not r then return empty or full end
  local due = window_lease(g, r, now)
  if not due then return empty or full end
  call('HSET', K_GLIMIT, 't:' .. g, int(due))
  if not (empty or full) then throttle(g, due) end
  return true
end

local function full() return max_bytes > 0 and bytes >= max_bytes end

-- A queue with no lane setting at all (no glimit: no ceiling, weight,
-- rate, default or walk) takes its turns in bulk. There a lane leaves the
-- ring only when it empties, so which lane gets each turn follows from the
-- ring's order and the lanes' sizes alone: the call reads the ring's head
-- and the size of each lane it meets once, plays the turns in Lua as the
-- LMOVE loop below would take them, reads each lane's share with one
-- ZRANGE, leases the jobs in turn order, takes what it leased off each
-- lane with one ZREMRANGEBYRANK and writes the ring back once. (Not
-- ZPOPMIN: its reply carries each job's score, 0, which Redis formats as
-- a double, ~2.4k instructions a job, and Lua makes a string of; but a
-- lane with one job in the call is popped, where a second call would
-- cost more than the one score.)
-- The same jobs, in the same order, under the same tokens, and the same
-- ring after it as the loop's; but per job only the lease's own calls,
-- where the loop pays an LMOVE, a ZPOPMIN and a ZCARD per job (with ten
-- busy lanes, 3 of the job's 7 lease calls). tests/lanes/test_ring.c runs
-- both on one random history and finds the same answers.
if not any_limit then
  local L = ring_len
  local ring, size = {}, {} -- the ring's head as read, in order; lane -> its size then
  -- The i-th lane of the ring as it was (nil past its end), read in chunks
  -- of what the turns may still need, with each new lane's size.
  local function ring_at(i, want)
    if i > #ring and i <= L then
      local got = call('LRANGE', K_RING, int(i - 1), int(i - 2 + math.max(want, 1)))
      for _, g in ipairs(got) do
        ring[#ring + 1] = g
        if not size[g] then size[g] = call('ZCARD', lane_key(g)) end
      end
    end
    return ring[i]
  end
  -- The first limit turns: the lanes served, in order; how many lanes of
  -- the ring as it was were taken off its head; and the lanes served that
  -- still hold jobs, in the order they went to the tail. The ring during
  -- the call is what is left of the old one, then those. An empty lane
  -- met on the ring (the ring rule broken) leaves it without a turn, as
  -- the loop's RPOP heals it.
  local function play(limit)
    local turns, back, left = {}, {}, {}
    local i, b = 1, 1
    while #turns < limit do
      local g
      if i <= L then
        g = ring_at(i, limit - #turns)
        i = i + 1
      elseif b <= #back then
        g = back[b]
        b = b + 1
      else
        break
      end
      local l = left[g] or size[g]
      if l > 0 then
        turns[#turns + 1] = g
        l = l - 1
        if l > 0 then back[#back + 1] = g end
      end
      left[g] = l
    end
    local tail = {}
    for j = b, #back do tail[#tail + 1] = back[j] end
    return turns, i - 1, tail
  end
  -- A ring at least as long as the claim (many tenants, few jobs each):
  -- each turn goes to the next of the ring's first n lanes, so a lane's
  -- size matters only as none, one or more. Each is popped two deep and
  -- its second job, if any, put straight back: for a lane of one job one
  -- call, where reading the sizes first cost a ZCARD more (a drained job
  -- of a one-job lane 141k -> 128k Redis instructions: tests/bench/
  -- RESULTS.md). A lane named twice among them is popped again after its
  -- put-back, as the loop serves it. An empty lane among them (the ring
  -- rule broken) would pass its turn to a lane further on: then every job
  -- popped goes back and the turns are played as below.
  if L >= n then
    local heads = call('LRANGE', K_RING, '0', int(n - 1))
    local k, first, again = #heads, {}, {}
    for i = 1, k do
      local lane_i = lane_key(heads[i])
      local p = call('ZPOPMIN', lane_i, '2') -- {id, score[, id, score]}
      if #p == 0 then
        for j = 1, i - 1 do call('ZADD', lane_key(heads[j]), '0', first[j]) end
        k = 0
        break
      end
      first[i] = p[1]
      if p[3] then
        call('ZADD', lane_i, '0', p[3])
        again[i] = true
      end
    end
    if k > 0 then
      local later, back, used = batch_new(), {}, k
      for i = 1, k do
        if i > used then -- cut short: not leased, back to its lane
          call('ZADD', lane_key(heads[i]), '0', first[i])
        else
          bytes = bytes + lease(first[i], heads[i], dl, token(tok + i, now), now, by, out,
                                width, later)
          if again[i] then back[#back + 1] = heads[i] end
          if max_bytes > 0 and bytes >= max_bytes and i < k then used = i end
        end
      end
      batch_run(later, 'ZADD')
      call('LTRIM', K_RING, int(used), '-1')
      if #back > 0 then call('RPUSH', K_RING, unpack(back)) end
      return out
    end
  end
  local turns, taken, tail = play(n)
  local ids, k, at, lanes, popped, later = {}, {}, {}, {}, {}, batch_new()
  for _, g in ipairs(turns) do k[g] = (k[g] or 0) + 1 end
  for _, g in ipairs(turns) do
    if not ids[g] then
      -- A lane's one job of the call (many tenants, few jobs each) is
      -- popped: one call and one score cost less than two calls.
      if k[g] == 1 then
        ids[g] = call('ZPOPMIN', lane_key(g)) -- {id, score}
        popped[g] = true
      else
        ids[g] = call('ZRANGE', lane_key(g), '0', int(k[g] - 1))
      end
      at[g] = 1
      lanes[#lanes + 1] = g
    end
  end
  for t, g in ipairs(turns) do
    local id = ids[g][at[g]]
    at[g] = at[g] + 1
    served = t
    bytes = bytes + lease(id, g, dl, token(tok + t, now), now, by, out, width, later)
    if max_bytes > 0 and bytes >= max_bytes and t < #turns then
      -- Cut short: the jobs read for later turns stay in their lanes (only
      -- what was leased is taken off below; a popped one goes back, score
      -- 0, to its id-ordered place at the head), and the ring is what the
      -- first t turns leave.
      taken, tail = select(2, play(t))
      break
    end
  end
  -- Each lane's leased jobs are its first at - 1, in the order read.
  for _, g in ipairs(lanes) do
    if popped[g] then
      if at[g] == 1 then call('ZADD', lane_key(g), '0', ids[g][1]) end
    elseif at[g] > 1 then
      call('ZREMRANGEBYRANK', lane_key(g), '0', int(at[g] - 2))
    end
  end
  batch_run(later, 'ZADD')
  if taken > 0 then call('LTRIM', K_RING, int(taken), '-1') end
  -- Not ring_push: the lanes were on the ring all along (no wake is due).
  if #tail > 0 then call('RPUSH', K_RING, unpack(tail)) end
  return out
end

-- One HMGET per call, and only when glimit exists (which glimit() reads
-- anyway): a queue with no setting at all pays nothing for weights.
local f = call('HMGET', K_GLIMIT, 'weighted', 'turn', 'd:weight')
if not f[1] and not f[3] then
  while served < n do
    local g = call('LMOVE', K_RING, K_RING, 'LEFT', 'RIGHT')
    if not g then break end
    if not serve(g) then
      call('RPOP', K_RING) -- an empty lane on the ring breaks the ring rule; heal it
    else
      if spent(g, settings(g)) then call('RPOP', K_RING) end
      if full() then break end
    end
  end
  return out
end

local tg, tused = turn_of(f[2])
local head, used
while served < n do
  if not head then
    head = call('LINDEX', K_RING, '0')
    if not head then break end
    used = head == tg and tused or 0
    tg = nil -- a turn carried over applies to the first head only
  end
  local g = head
  if not serve(g) then
    call('LPOP', K_RING)
    head = nil
  else
    used = used + 1
    local s = call('HMGET', K_GLIMIT, g, 'w:' .. g, 'r:' .. g, 'd:limit', 'd:rate')
    local r = s[3] or s[5]
    if spent(g, tonumber(s[1] or s[4] or ''), rate_of(r) and r or nil) then
      call('LPOP', K_RING)
      head = nil
    elseif used >= (tonumber(s[2] or f[3] or '') or 1) then
      call('LMOVE', K_RING, K_RING, 'LEFT', 'RIGHT')
      head = nil
    end
    if full() then break end
  end
end
local t = head and (head .. ':' .. int(used)) or nil
if t ~= f[2] then
  if t then
    call('HSET', K_GLIMIT, 'turn', t)
  else
    call('HDEL', K_GLIMIT, 'turn')
  end
end
return out
