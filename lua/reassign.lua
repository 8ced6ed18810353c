-- reassign: move a pending job to another group's lane. The source group is
-- flags: allow-oom (it runs while Redis is out of memory; scripts/embed_lua.py)
-- read from the row, so the move cannot disagree with it; the job keeps its
-- mint-ordered place (score 0, ordered by id) in the destination lane.
-- KEYS:  none read (lib.lua builds every key from ARGV[1]).
-- ARGV:  1 prefix, 2 job id, 3 destination group
-- Returns the source group ('' when the job was ungrouped).
-- Errors: ENOJOB, ESTATE (the job is not pending), EBRAND, EARG.
local id, dst = ARGV[2], ARGV[3]
if not valid_job(id) then return redis.error_reply('EARG malformed job id') end
if not valid_group(dst) then return redis.error_reply('EBRAND malformed group id') end
local row = row_key(id)
local f = call('HMGET', row, 'state', 'group')
if not f[1] then return redis.error_reply('ENOJOB no such job') end
if f[1] ~= 'pending' then
  return redis.error_reply('ESTATE job is ' .. f[1] .. ', not pending')
end
local src = f[2] or ''
if src == dst then return src end
if src == '' then
  call('ZREM', K_PENDING, id)
else
  call('ZREM', lane_key(src), id)
  reconcile(src)
end
call('HSET', row, 'group', dst)
to_backlog(id, dst)
return src
