-- claim_flat: lease up to n jobs from the flat (ungrouped) set, oldest first.
-- flags: allow-oom (it runs while Redis is out of memory; scripts/embed_lua.py)
-- KEYS:  none read (lib.lua builds every key from ARGV[1]).
-- ARGV:  1 prefix, 2 n (>= 1), 3 lease_ms (>= 1), 4 waits (optional: '1'
--        adds each job's wait as a sixth field, as for claim),
--        5 max_bytes (optional, 0 = none; as for claim), 6 tag (optional,
--        as for claim)
-- Returns {deadline, id, '', payload, attempt, token, ...} as claim does.
local n, lease_ms = tonumber(ARGV[2]), tonumber(ARGV[3])
if not n or n < 1 or not lease_ms or lease_ms < 1 then
  return redis.error_reply('EARG count and lease_ms must be positive')
end
local width = ARGV[4] == '1' and 6 or 5
local max_bytes = tonumber(ARGV[5] or '0') or 0
local by = ARGV[6]
local now = now_ms()
local deadline = now + lease_ms
local out = {deadline}
-- Read, then take off what was leased (not ZPOPMIN, whose reply carries
-- each job's score: see the bulk claim in claim.lua).
local head = call('ZRANGE', K_PENDING, '0', int(n - 1))
if #head == 0 then return out end
local k = #head
local tok = call('INCRBY', K_SEQ, int(k)) - k
local dl = int(deadline)
local bytes, later, used = 0, batch_new(), k
for i = 1, k do
  bytes = bytes + lease(head[i], '', dl, token(tok + i, now), now, by, out, width, later)
  if max_bytes > 0 and bytes >= max_bytes and i < k then
    -- The rest stay where they are; their reserved tokens are skipped, as
    -- a short grouped claim's are.
    used = i
    break
  end
end
call('ZREMRANGEBYRANK', K_PENDING, '0', int(used - 1))
batch_run(later, 'ZADD')
return out
