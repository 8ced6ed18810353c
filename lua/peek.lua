-- peek: one page of a lane, the flat set, or a state's jobs, in service
-- order, each with its row. It changes nothing.
-- flags: no-writes (it only reads; Redis refuses a write; scripts/embed_lua.py)
-- KEYS:  none read (lib.lua builds every key from ARGV[1]).
-- ARGV:  1 prefix, 2 what: 'lane' (ARGV 3 the group), 'flat', 'active'
--        (with a group: that group's leases), 'delayed' or 'dead';
--        3 group ('' for none), 4 cursor ('' to start: a page's last id
--        for 'lane' and 'flat', an offset for the others), 5 count
--        (1..1000), 6 max_bytes (> 0: stop once the page's payloads add
--        up to this; at least one job)
-- Returns {next cursor ('' when no job is left after this page), id,
-- {field, value, ...}, id, {...}, ...}: each job's row as job.lua shows
-- it (lib.lua:row_view: an active job's lease_until last).
--
-- Service order: a lane and the flat set are sorted sets of score 0, so
-- ordered by id, and serve their smallest id first; a page resumes after
-- the last id it returned (ZRANGE BYLEX), so pages neither skip nor
-- repeat a job while jobs come and go. delayed (due time), active (lease
-- deadline) and dead (time died) are ordered by score; their pages go by
-- offset, so a page may skip or repeat a job that moved meanwhile.
-- O(log N + count) per call.
local what, g, cursor = ARGV[2], ARGV[3], ARGV[4]
local count, max_bytes = tonumber(ARGV[5]), tonumber(ARGV[6] or '0') or 0
if not count or count < 1 or count > 1000 then
  return redis.error_reply('EARG count must be 1..1000')
end
if g ~= '' and not valid_group(g) then return redis.error_reply('EBRAND malformed group id') end
local key, bylex
if what == 'lane' and g ~= '' then key, bylex = lane_key(g), true
elseif what == 'flat' then key, bylex = K_PENDING, true
elseif what == 'active' then key = g ~= '' and lane_active_key(g) or K_ACTIVE
elseif what == 'delayed' and g == '' then key = K_DELAYED
elseif what == 'dead' and g == '' then key = K_DEAD
else return redis.error_reply('EARG nothing to peek at: ' .. what) end

-- One more than asked, to know whether anything follows the page.
local ids
if bylex then
  local from = cursor == '' and '-' or '(' .. cursor
  ids = call('ZRANGE', key, from, '+', 'BYLEX', 'LIMIT', 0, count + 1)
else
  local off = tonumber(cursor == '' and '0' or cursor)
  if not off or off < 0 or off % 1 ~= 0 then return redis.error_reply('EARG bad cursor') end
  ids = call('ZRANGE', key, off, off + count)
end
local out, bytes, n = {''}, 0, 0
for i = 1, math.min(#ids, count) do
  local row = row_view(ids[i])
  out[#out + 1] = ids[i]
  out[#out + 1] = row
  n = i
  for k = 1, #row, 2 do
    if row[k] == 'payload' then bytes = bytes + #row[k + 1] end
  end
  if max_bytes > 0 and bytes >= max_bytes then break end
end
if n < #ids then
  out[1] = bylex and ids[n] or int(tonumber(cursor == '' and '0' or cursor) + n)
end
return out
