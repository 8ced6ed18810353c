-- check: verify the five store invariants for one queue; docs/ARCHITECTURE.md
-- (section 4) states them and what this checks of each.
-- Admin and test use only: it finds the queue's rows and lane keys with
-- SCAN ... MATCH, which walks every key of the database, so its cost is
-- O(keys in the database + groups + ring). It changes nothing.
-- KEYS:  the standard ten (lib.lua).
-- ARGV:  1 prefix
-- Returns a list of violations, each a sentence; empty when all hold.
local v = {}
local function bad(msg) v[#v + 1] = msg end

-- Invariant 1: a group is on the ring at most once.
local ring = call('LRANGE', K_RING, 0, -1)
local onring, groups = {}, {}
for _, g in ipairs(ring) do
  if onring[g] then bad('ring: ' .. g .. ' is on the ring more than once') end
  onring[g] = true
  groups[g] = true
end
for _, g in ipairs(call('SMEMBERS', K_GROUPS)) do groups[g] = true end
for _, g in ipairs(call('SMEMBERS', K_PAUSED)) do groups[g] = true end
for _, g in ipairs(call('HKEYS', K_GLIMIT)) do groups[g] = true end

local function scan(pattern, each)
  local cursor = '0'
  repeat
    local r = call('SCAN', cursor, 'MATCH', pattern, 'COUNT', 1000)
    cursor = r[1]
    for _, key in ipairs(r[2]) do each(key) end
  until cursor == '0'
end

-- Every lane key names a group, registered or not.
scan(PFX .. 'g:*', function(key)
  local g = string.match(string.sub(key, #PFX + 1), '^g:(.+):%a+$')
  if g then groups[g] = true end
end)

-- Every row of the queue, by state.
local rows = {}
scan(PFX .. 'job:*', function(key)
  local id = string.sub(key, #PFX + 5)
  local f = call('HMGET', key, 'state', 'group')
  rows[id] = {state = f[1] or '', group = f[2] or ''}
  if f[2] and f[2] ~= '' then groups[f[2]] = true end
end)

-- Invariant 4 (and 5): each structure holds only rows in the matching
-- state, and each row is in exactly the structure its state names.
local where = {}
local function member(set, id, state, group)
  local r = rows[id]
  if not r then
    bad(set .. ': ' .. id .. ' has no job row (lost)')
    return
  end
  if r.state ~= state then
    bad(set .. ': ' .. id .. ' is ' .. r.state .. ', expected ' .. state)
  end
  if group and r.group ~= group then
    bad(set .. ': ' .. id .. ' belongs to group ' .. r.group .. ', not ' .. group)
  end
  if where[id] then bad(id .. ' is in both ' .. where[id] .. ' and ' .. set) end
  where[id] = set
end
for _, id in ipairs(call('ZRANGE', K_PENDING, 0, -1)) do member('pending', id, 'pending', '') end
for g in pairs(groups) do
  for _, id in ipairs(call('ZRANGE', lane_key(g), 0, -1)) do
    member('lane ' .. g, id, 'pending', g)
  end
end
for _, id in ipairs(call('ZRANGE', K_ACTIVE, 0, -1)) do member('active', id, 'active') end
for _, id in ipairs(call('ZRANGE', K_DELAYED, 0, -1)) do member('delayed', id, 'delayed') end
for _, id in ipairs(call('ZRANGE', K_DEAD, 0, -1)) do member('dead', id, 'dead') end

local valid = {pending = true, active = true, delayed = true, dead = true, completed = true}
local live = {}
for id, r in pairs(rows) do
  if not valid[r.state] then bad('row ' .. id .. ' has unknown state "' .. r.state .. '"') end
  if r.state == 'completed' then
    if where[id] then bad('row ' .. id .. ' is completed but still in ' .. where[id]) end
  elseif not where[id] then
    bad('row ' .. id .. ' is ' .. r.state .. ' but in no structure (lost)')
  end
  if r.state == 'active' and r.group ~= '' then
    live[r.group] = (live[r.group] or 0) + 1
  end
end

-- A group with an active job but no lease index is found from its rows.
for g in pairs(live) do groups[g] = true end

for g in pairs(groups) do
  -- Invariant 3: gactive[G], the size of G's lease index g:<G>:active, is
  -- the number of G's active jobs.
  local act, n = gactive(g), live[g] or 0
  if act ~= n then
    bad('gactive: ' .. g .. ' holds ' .. act .. ' leases but ' .. n .. ' of its jobs are active')
  end
  -- Invariant 2: on the ring exactly when serviceable.
  local want = serviceable(g)
  if want and not onring[g] then bad('ring: ' .. g .. ' is serviceable but off the ring') end
  if onring[g] and not want then bad('ring: ' .. g .. ' is on the ring but not serviceable') end
  if call('ZCARD', lane_key(g)) > 0 and call('SISMEMBER', K_GROUPS, g) == 0 then
    bad('groups: ' .. g .. ' has pending jobs but is not registered')
  end
end
return v
