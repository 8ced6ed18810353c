-- check: one bounded step of the store-invariant check of one queue;
-- docs/ARCHITECTURE.md (section 4) states the invariants and how the
-- steps cover them. The daemon runs the steps in order
-- (daemon/store/check.c): rows, flat, sets, then ring, each repeated until
-- it says it is done; after a rows or sets step that named groups, groups
-- steps examine them; after a ring step whose lanes it has seen before,
-- dups; and once the ring is walked, off for the lanes found serviceable
-- but not seen on it. A step examines about ARGV[4] items (keys, members,
-- groups or lanes) and changes nothing, so Redis never runs one for long
-- and every violation it reports held when it ran.
-- flags: no-writes (it only reads; Redis refuses a write; scripts/embed_lua.py)
-- KEYS:  none read (lib.lua builds every key from ARGV[1]).
-- ARGV:  1 prefix, 2 step, 3 cursor ('' to start), 4 budget (items, >= 1),
--        5... the step's list:
--   rows    SCAN of the queue's keys (about budget / 2 of them, in up to
--           eight SCANs when the database holds more than the queue):
--           each job row checked against the structures; no list.
--           Names the unregistered groups that have a lane or a lease
--           index.
--   flat    pending, active, delayed and dead, paged by index: each member
--           checked against its row; no list.
--   sets    SSCAN of groups, then of paused, then HSCAN of glimit (each
--           setting's value checked; first, the weighted turn, invariant
--           7); no list. Names every registered group, and the paused,
--           limited or weighted groups that are not registered.
--   groups  a list of groups: each one's registration, and every member of
--           its lane, of its lease index and of its delayed index against
--           its row. Names the
--           ones that are serviceable.
--   ring    the ring, one page from the cursor on: each lane must be
--           serviceable. Names the page's lanes; the cursor carries the
--           last lane read, so a ring that turned by up to a page since
--           (every claim moves its head to its tail) is resumed after it:
--           what moved is not skipped.
--   dups    a list of (group, index, index): a lane read twice by the walk
--           is reported when both indexes (give or take a few) hold it.
--   off     a list of groups: each one that is serviceable and (LPOS,
--           O(ring)) not on the ring is reported.
-- Returns {next cursor ('' = this step is done), first, names,
-- violations}: first is the ring index of the first name of a ring step
-- (0 otherwise); names as listed above; violations are sentences.
local step, cursor, budget = ARGV[2], ARGV[3], tonumber(ARGV[4])
if not budget or budget < 1 then return redis.error_reply('EARG bad budget') end
local v, names = {}, {}
local function bad(msg) v[#v + 1] = msg end
-- During a default's re-place walk (lib.lua:replace_begin) the lanes not yet
-- placed wait in old rings: serviceable but off the live ring, or held by a
-- rate with no due time yet. Those two checks wait for the walk's end;
-- the live ring itself is placed by the rule throughout.
local in_walk = call('HEXISTS', K_GLIMIT, 'replacing') == 1

-- The state and group of id's row; state nil when it has no row.
local function row_of(id)
  local f = call('HMGET', row_key(id), 'state', 'group')
  if f[1] then return f[1], f[2] or '' end
  if f[2] or call('EXISTS', row_key(id)) == 1 then return '', f[2] or '' end
  return nil, ''
end

local function who(g) return g == '' and 'no group' or 'group ' .. g end

-- id, whose row is in state and group, is a member of structure set,
-- which holds rows in state want (and, wg given, of group wg).
local function against(set, id, state, group, want, wg)
  if state ~= want then bad(set .. ': ' .. id .. ' is ' .. state .. ', expected ' .. want) end
  if wg and group ~= wg then bad(set .. ': ' .. id .. ' belongs to ' .. who(group)) end
end

-- Invariant 4 from a structure's side: each member has a row that says
-- it belongs there.
local function member(set, id, want, wg)
  local state, group = row_of(id)
  if not state then return bad(set .. ': ' .. id .. ' has no job row (lost)') end
  against(set, id, state, group, want, wg)
end

-- A member of one of g's indexes of rows in state want ('active': the
-- lease index, named gactive; 'delayed': the delayed index, gdelayed)
-- must be a row of g in that state. With the rows step (every such row of
-- g is in its index), each index is exactly g's jobs in that state, so
-- gactive[g] counts them (invariant 3) and the cap rule does (invariant 8).
local function indexed(want, g, id)
  local state, group = row_of(id)
  local pre = 'g' .. want .. ': ' .. g .. ' holds ' .. id .. ', which '
  if not state then return bad(pre .. 'has no job row') end
  if state ~= want then bad(pre .. 'is ' .. state .. ', not ' .. want) end
  if group ~= g then bad(pre .. 'belongs to ' .. who(group)) end
end

-- Members from index i on of zset key, each passed to check, at most n
-- of them. Returns how many it read and whether the set goes on.
local function page(key, i, n, check)
  local ids = call('ZRANGE', key, i, i + n - 1)
  for _, id in ipairs(ids) do check(id) end
  return #ids, #ids == n and call('ZCARD', key) > i + n
end

-- Invariant 4 from the row's side: a row is in exactly the structure its
-- state names (none when completed), and an active grouped row is in its
-- group's lease index. Each structure holding it judges it as its member
-- check would, in the same words.
local valid = {pending = true, active = true, delayed = true, dead = true, completed = true}
local function row(id)
  local state, g = row_of(id)
  if not state then return end -- gone since SCAN named it
  if not valid[state] then return bad('row ' .. id .. ' has unknown state "' .. state .. '"') end
  local sets = {{'pending', K_PENDING, 'pending', ''}, {'active', K_ACTIVE, 'active'},
                {'delayed', K_DELAYED, 'delayed'}, {'dead', K_DEAD, 'dead'}}
  if g ~= '' then sets[#sets + 1] = {'lane ' .. g, lane_key(g), 'pending', g} end
  local found = {}
  for _, s in ipairs(sets) do
    if call('ZSCORE', s[2], id) then
      found[#found + 1] = s[1]
      against(s[1], id, state, g, s[3], s[4])
    end
  end
  for k = 2, #found do bad(id .. ' is in both ' .. found[1] .. ' and ' .. found[k]) end
  if state == 'completed' then
    if found[1] then bad('row ' .. id .. ' is completed but still in ' .. found[1]) end
  elseif not found[1] then
    bad('row ' .. id .. ' is ' .. state .. ' but in no structure (lost)')
  end
  if state == 'active' and g ~= '' and not call('ZSCORE', lane_active_key(g), id) then
    bad('gactive: ' .. g .. ' does not hold ' .. id .. ', one of its active jobs')
  end
  if state == 'delayed' and g ~= '' and not call('ZSCORE', lane_delayed_key(g), id) then
    bad('gdelayed: ' .. g .. ' does not hold ' .. id .. ', one of its delayed jobs')
  end
end

-- Invariant 9, retention (lib.lua:retire): a bucket done:<t> is in the
-- done index at t, or retire never reaches it and its rows are never
-- deleted; and it holds only ids of completed rows (one that is gone is
-- not counted: a row of a bucket can be deleted only by retire, or by
-- an operator). Its first ids are checked, as many as a row step's
-- budget would take.
local function retained(t)
  if call('ZSCORE', K_DONE, t) ~= t then
    bad('done:' .. t .. ' is not in the done index at ' .. t .. ': its rows would never be deleted')
  end
  for _, id in ipairs(call('LRANGE', done_key(t), 0, math.max(0, math.floor(budget / 2) - 1))) do
    local state = row_of(id)
    if state and state ~= 'completed' then
      bad('done:' .. t .. ' holds ' .. id .. ', which is ' .. state .. ', not completed')
    end
  end
end

local registered = {}
local function is_registered(g)
  if registered[g] == nil then registered[g] = call('SISMEMBER', K_GROUPS, g) == 1 end
  return registered[g]
end

-- Invariant 7, the rate window (lib.lua:window_lease): only a group that
-- a rate applies to has one; its entries are "t:c:cum", in time order,
-- each cum the one before plus c; and a lane the ring rule puts on the
-- ring has fewer than N leases of the last P ms in it (a full window has
-- a t:G ahead that holds the lane). A window is at most ~1025 entries.
local function window(g, where)
  local win = lane_window_key(g)
  if call('EXISTS', win) == 0 then return end
  local _, r = settings(g)
  if not r then return bad('window: ' .. g .. ' has a rate window but no rate') end
  local n, per = rate_of(r)
  local now, count, last_t, last_cum = clock(), 0, nil, nil
  for _, e in ipairs(call('LRANGE', win, 0, budget * 8)) do
    local t, c, cum = window_entry(e)
    if not t or c < 1 then return bad('window: ' .. g .. ' has an entry "' .. e .. '"') end
    if last_t and (t <= last_t or cum ~= last_cum + c) then
      return bad('window: ' .. g .. ' entry "' .. e .. '" is out of order or miscounted')
    end
    last_t, last_cum = t, cum
    if t + per > now then count = count + c end
  end
  if where == 'ring' and count >= n then
    bad('window: ' .. g .. ' is serviceable with ' .. count .. ' leases in its window, its rate ' ..
        r)
  end
end

-- A group's own checks. Invariant 2 needs the whole ring, so the daemon
-- gets the serviceable ones and holds them against the ring walk.
local function group(g)
  if call('ZCARD', lane_key(g)) > 0 and not is_registered(g) then
    bad('groups: ' .. g .. ' has pending jobs but is not registered')
  end
  local where = placement(g)
  if where == 'ring' then names[#names + 1] = g end
  -- Invariant 7: held by its rate alone, it must have a due time.
  if where == 'wait' and not in_walk then
    bad('throttled: ' .. g .. ' is held by its rate but has no due time')
  end
  window(g, where)
end

-- One field of glimit (lib.lua: G, w:G, r:G, t:G, c:G, weighted, turn,
-- the defaults d:limit, d:weight, d:rate, d:cap) and its value:
-- returns the group it is about, if any.
local function setting(field, value)
  local num = tonumber(value)
  local int_ok = num ~= nil and num == math.floor(num)
  local g = string.match(field, '^w:(.+)$')
  if g then
    if not (int_ok and num >= 1 and num <= 1000) then
      bad('glimit: the weight of ' .. g .. ' is "' .. value .. '", not 1..1000')
    end
    return g
  end
  if field == 'weighted' then
    if not (int_ok and num >= 1) then bad('glimit: weighted is "' .. value .. '"') end
    return nil
  end
  if field == 'turn' then return nil end
  if field == 'replacing' then
    if not walk_of(value) then bad('glimit: replacing is "' .. value .. '", not a walk') end
    return nil
  end
  -- The queue defaults (lib.lua: d:limit, d:weight, d:rate) name no group.
  if field == 'd:weight' then
    if not (int_ok and num >= 1 and num <= 1000) then
      bad('glimit: the default weight is "' .. value .. '", not 1..1000')
    end
    return nil
  end
  if field == 'd:rate' then
    if not rate_of(value) then bad('glimit: the default rate is "' .. value .. '"') end
    return nil
  end
  if field == 'd:limit' or field == 'd:cap' then
    local what = field == 'd:cap' and 'cap' or 'ceiling'
    if not (int_ok and num >= 1) then
      bad('glimit: the default ' .. what .. ' is "' .. value .. '", not a positive integer')
    end
    return nil
  end
  g = string.match(field, '^r:(.+)$')
  if g then
    if not rate_of(value) then bad('glimit: the rate of ' .. g .. ' is "' .. value .. '"') end
    return g
  end
  g = string.match(field, '^c:(.+)$')
  if g then
    if not (int_ok and num >= 1) then
      bad('glimit: the cap of ' .. g .. ' is "' .. value .. '", not a positive integer')
    end
    return g
  end
  g = string.match(field, '^t:(.+)$')
  if g then
    if not num then bad('glimit: the rate due time (t:) of ' .. g .. ' is "' .. value .. '"') end
    return g
  end
  if not (int_ok and num >= 1) then
    bad('glimit: the ceiling of ' .. field .. ' is "' .. value .. '", not a positive integer')
  end
  return field
end

-- Invariant 7, the weighted turn: glimit's turn names the ring head and a
-- count below its weight (its own, else the queue default), and weighted
-- counts the w: fields (HLEN bounds the count; the check counts them only
-- when the hash is small enough for one budget).
local function lane_settings()
  local f = call('HMGET', K_GLIMIT, 'weighted', 'turn', 'd:weight', 'd:rate')
  if f[2] then
    local tg, used = turn_of(f[2])
    local w = tonumber(call('HGET', K_GLIMIT, 'w:' .. (tg or '')) or f[3] or '1')
    if not tg or used < 1 or used >= w then
      bad('glimit: turn "' .. f[2] .. '" is not a weighted turn part-way through')
    end
    if tg and call('LINDEX', K_RING, 0) ~= tg then
      bad('glimit: turn names ' .. tg .. ', which is not the ring head')
    end
  end
  -- Invariant 7 from the index's side: each throttled lane has a rate, its
  -- own or the queue default.
  if call('ZCARD', K_THROTTLED) <= budget then
    for _, g in ipairs(call('ZRANGE', K_THROTTLED, 0, -1)) do
      if not call('HGET', K_GLIMIT, 'r:' .. g) and not f[4] then
        bad('throttled: ' .. g .. ' is held for a rate it does not have')
      end
    end
  end
  if call('HLEN', K_GLIMIT) > budget then return end
  local seen = 0
  for _, field in ipairs(call('HKEYS', K_GLIMIT)) do
    if string.sub(field, 1, 2) == 'w:' then seen = seen + 1 end
  end
  if seen ~= tonumber(f[1] or '0') then
    bad('glimit: weighted is ' .. (f[1] or 'absent') .. ' but ' .. seen .. ' weights are set')
  end
end

-- A cursor is numbers joined with ':'.
local function join(...) return table.concat({...}, ':') end
local fields = {}
for f in string.gmatch(cursor .. ':', '([^:]*):') do fields[#fields + 1] = f end
local function num(k) return tonumber(fields[k]) or 0 end

if step == 'rows' then
  -- A row is looked for in up to six structures: it counts as two items.
  -- In a database shared with other queues most of what SCAN visits is
  -- theirs and costs next to nothing, so a call goes on scanning, for what
  -- is left of its count, until it has met that many of the queue's keys
  -- or scanned eight times.
  local count = math.max(1, math.floor(budget / 2))
  local c, met, scans, named = cursor == '' and '0' or cursor, 0, 0, {}
  repeat
    local r = call('SCAN', c, 'MATCH', PFX .. '*', 'COUNT', count - met)
    c, scans, met = r[1], scans + 1, met + #r[2]
    for _, key in ipairs(r[2]) do
      local rest = string.sub(key, #PFX + 1)
      local g = string.match(rest, '^g:([^:]+):%a+$')
      if string.sub(rest, 1, 4) == 'job:' then
        row(string.sub(rest, 5))
      elseif string.match(rest, '^done:%d+$') then
        retained(string.sub(rest, 6))
      elseif g and not named[g] and not is_registered(g) then
        named[g] = true
        names[#names + 1] = g
      end
    end
  until c == '0' or met >= count or scans >= 8
  return {c == '0' and '' or c, 0, names, v}
end

if step == 'flat' then
  -- cursor: which structure (1..4), index in it.
  local sets = {{'pending', K_PENDING, ''}, {'active', K_ACTIVE}, {'delayed', K_DELAYED},
                {'dead', K_DEAD}}
  local k, i, left = math.max(num(1), 1), num(2), budget
  while k <= #sets and left > 0 do
    local s = sets[k]
    local n, more = page(s[2], i, left, function(id) member(s[1], id, s[1], s[3]) end)
    left = left - math.max(n, 1)
    if more then
      i = i + n
    else
      k, i = k + 1, 0
    end
  end
  return {k <= #sets and join(k, i) or '', 0, names, v}
end

if step == 'sets' then
  -- cursor: which set (1 groups, 2 paused, 3 glimit), its scan cursor.
  local k, c = math.max(num(1), 1), fields[2] or '0'
  if c == '' then c = '0' end
  local r
  if k == 3 then
    if c == '0' then lane_settings() end
    r = call('HSCAN', K_GLIMIT, c, 'COUNT', budget)
    for j = 1, #r[2], 2 do
      local g = setting(r[2][j], r[2][j + 1])
      if g and not is_registered(g) then names[#names + 1] = g end
    end
  else
    r = call('SSCAN', k == 1 and K_GROUPS or K_PAUSED, c, 'COUNT', budget)
    for _, g in ipairs(r[2]) do
      if k == 1 or not is_registered(g) then names[#names + 1] = g end
    end
  end
  if r[1] ~= '0' then return {join(k, r[1]), 0, names, v} end
  return {k < 3 and join(k + 1, '0') or '', 0, names, v}
end

if step == 'groups' then
  -- cursor: which group of the list (1...), part (0 its own checks, 1 its
  -- lane, 2 its lease index, 3 its delayed index), index in that part. A group's own checks
  -- (half a dozen commands) count as two items, its members one each.
  local k, part, i, left = math.max(num(1), 1), num(2), num(3), budget
  while ARGV[4 + k] and left > 0 do
    local g = ARGV[4 + k]
    local n, more = 2, false
    if part == 0 then
      group(g)
    elseif part == 1 then
      n, more = page(lane_key(g), i, left,
                     function(id) member('lane ' .. g, id, 'pending', g) end)
    elseif part == 2 then
      n, more = page(lane_active_key(g), i, left, function(id) indexed('active', g, id) end)
    else
      n, more = page(lane_delayed_key(g), i, left, function(id) indexed('delayed', g, id) end)
    end
    left = left - n
    if more then
      i = i + n
    elseif part < 3 then
      part, i = part + 1, 0
    else
      k, part, i = k + 1, 0, 0
    end
  end
  return {ARGV[4 + k] and join(k, part, i) or '', 0, names, v}
end

if step == 'ring' then
  -- cursor: the index to go on from, how many more lanes the walk may
  -- read (twice the ring: a ring that rotates under the walk brings lanes
  -- read back to its tail), and the lane read just before the index.
  local len = call('LLEN', K_RING)
  local i, quota, last = string.match(cursor, '^(%d+):(%d+):(.*)$')
  i, quota = tonumber(i) or 0, tonumber(quota) or 2 * len + budget
  local from = i
  if last and i > 0 and call('LINDEX', K_RING, i - 1) ~= last then
    -- Lanes only move towards the head (rotation, removal), so the lane
    -- read last is a little before i - 1 now; not found within a page,
    -- the walk reads that page again rather than skip what moved.
    local lo = math.max(0, i - budget)
    local back = call('LRANGE', K_RING, lo, i - 1)
    from = lo
    for j = #back, 1, -1 do
      if back[j] == last then
        from = lo + j
        break
      end
    end
  end
  local lanes = call('LRANGE', K_RING, from, from + budget - 1)
  for _, g in ipairs(lanes) do
    if not serviceable(g) then bad('ring: ' .. g .. ' is on the ring but not serviceable') end
  end
  quota = quota - #lanes
  local done = #lanes == 0 or from + #lanes >= len or quota <= 0
  return {done and '' or join(from + #lanes, quota, lanes[#lanes]), from, lanes, v}
end

if step == 'dups' then
  -- A lane the walk read at two indexes: on the ring twice if, now, two
  -- places within a few of them hold it.
  local near = 16
  local k, left = math.max(num(1), 1), budget
  while ARGV[2 + 3 * k] and left > 0 do
    local g, a, b = ARGV[2 + 3 * k], tonumber(ARGV[3 + 3 * k]), tonumber(ARGV[4 + 3 * k])
    if not (a and b) then return redis.error_reply('EARG bad ring index') end
    local lo, hi = math.max(0, math.min(a, b) - near), math.max(a, b) + near
    local spans = {{lo, hi}}
    if math.abs(a - b) > 2 * near + 1 then
      spans = {{lo, math.min(a, b) + near}, {math.max(0, math.max(a, b) - near), hi}}
    end
    local seen = 0
    for _, s in ipairs(spans) do
      for _, e in ipairs(call('LRANGE', K_RING, s[1], s[2])) do
        if e == g then seen = seen + 1 end
      end
    end
    if seen >= 2 then bad('ring: ' .. g .. ' is on the ring more than once') end
    k, left = k + 1, left - 1
  end
  return {ARGV[2 + 3 * k] and tostring(k) or '', 0, names, v}
end

if step == 'off' then
  -- An LPOS reads the whole ring when the lane is not on it: ~500 lanes
  -- compared cost about one item. From the tail, where a lane that came
  -- back since the walk was pushed.
  local cost = 1 + math.floor(call('LLEN', K_RING) / 500)
  local k, left = math.max(num(1), 1), budget
  while ARGV[4 + k] and left > 0 do
    local g = ARGV[4 + k]
    if not in_walk and serviceable(g) and not call('LPOS', K_RING, g, 'RANK', -1) then
      bad('ring: ' .. g .. ' is serviceable but off the ring')
    end
    k, left = k + 1, left - cost
  end
  return {ARGV[4 + k] and tostring(k) or '', 0, names, v}
end

return redis.error_reply('EARG unknown check step')
