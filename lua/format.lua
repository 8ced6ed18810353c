-- format: one bounded step of bringing a queue's store up to this code's
-- format; the upgrade path for a store an older emqd wrote
-- (docs/ARCHITECTURE.md section 3, "Upgrading a store").
-- The store's format is the hash emq:{q}:format (built from the prefix, so
-- in the queue's slot), one field per upgrade; the only one so far:
--   gdelayed  the per-group delayed index (g:<G>:delayed, invariant 8).
--             An emqd from before it left every delayed grouped job out
--             of its group's index. Absent: not begun; "<due>:<job>": the
--             walk of delayed has indexed every member up to that one, in
--             delayed's order (due time, then job id byte-wise); "done":
--             every delayed job is in its group's index.
-- A step walks on from where the last one (this daemon's or another's)
-- stopped, puts each delayed grouped row it meets in its group's index
-- (and the group in the registry, as admit_row does), and records where it
-- stopped, all in one script: a daemon killed between steps leaves the
-- store as sound as before, and two daemons stepping at once share the
-- walk. The walk is by order, not by ZSCAN's cursor: a ZSCAN cursor is a
-- place in the set's hash table, whose hash seed changes when Redis
-- restarts or fails over, so a walk resumed there could skip members. A
-- job that leaves delayed between steps is not missed (it needs no index
-- entry any more: off_delayed removed it from both); one that enters it
-- did so through to_delayed, indexed already, wherever the walk is; only
-- rows that were in delayed before this code ran need the walk, and they
-- keep their place in the order until they leave. Indexing is ZADD of the
-- row's own due time, so a member met twice costs nothing.
-- No allow-oom flag: the step adds an index entry per job, so under
-- maxmemory Redis refuses it, and the next upkeep pass tries again.
-- KEYS:  none read (lib.lua builds every key from ARGV[1]).
-- ARGV:  1 prefix, 2 max members walked this call (>= 1)
-- Returns {done (1: the format is current, nothing to do; 0: call again),
-- rows indexed this call}.
local max = tonumber(ARGV[2])
if not max or max < 1 or max ~= math.floor(max) then
  return redis.error_reply('EARG bad batch size')
end
local K_FORMAT = PFX .. 'format'
local at = call('HGET', K_FORMAT, 'gdelayed')
if at == 'done' then return {1, 0} end

-- a before b in a sorted set's member order (bytes, memcmp), whatever the
-- locale: Lua's < on strings is strcoll.
local function before(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return #a < #b
end

-- The rank in delayed of the first member after (due, id), delayed's
-- order. While id is still there at that due time, its rank + 1; else
-- (promoted, removed, or delayed anew since) a binary search among the
-- members of that due time, which delayed holds in id order: O(log n)
-- calls of O(log n) each, never a walk over what came before.
local function rank_after(due, id)
  if call('ZSCORE', K_DELAYED, id) == due then return call('ZRANK', K_DELAYED, id) + 1 end
  local lo = call('ZCOUNT', K_DELAYED, '-inf', '(' .. due)
  local hi = lo + call('ZCOUNT', K_DELAYED, due, due)
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if before(call('ZRANGE', K_DELAYED, mid, mid)[1], id) then
      lo = mid + 1
    else
      hi = mid
    end
  end
  return lo
end

local from = 0
if at then
  local due, id = string.match(at, '^([^:]+):(.+)$')
  if not due then return redis.error_reply('EARG bad gdelayed marker "' .. at .. '"') end
  from = rank_after(due, id)
end
local page = call('ZRANGE', K_DELAYED, from, from + max - 1, 'WITHSCORES')
local indexed, registered = 0, {}
for i = 1, #page, 2 do
  local id, due = page[i], page[i + 1]
  local f = call('HMGET', row_key(id), 'state', 'group')
  local g = f[2] or ''
  -- A member whose row is missing or not delayed is check's to report
  -- (invariant 4); indexing it would only add a second violation.
  if f[1] == 'delayed' and g ~= '' then
    indexed = indexed + call('ZADD', lane_delayed_key(g), due, id)
    if not registered[g] then
      registered[g] = true
      call('SADD', K_GROUPS, g)
    end
  end
end
if #page < 2 * max then
  call('HSET', K_FORMAT, 'gdelayed', 'done')
  return {1, indexed}
end
call('HSET', K_FORMAT, 'gdelayed', page[#page] .. ':' .. page[#page - 1])
return {0, indexed}
