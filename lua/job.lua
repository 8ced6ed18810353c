-- job: read one job's row.
-- flags: no-writes (it only reads; Redis refuses a write; scripts/embed_lua.py)
-- KEYS:  none read (lib.lua builds every key from ARGV[1]).
-- ARGV:  1 prefix, 2 job id (checked by the daemon: a JOB id)
-- Returns the row as HGETALL does (field, value, ...); empty if none.
--
-- A script rather than a plain HGETALL so that it runs in order with the
-- queue's other calls even across a NOSCRIPT recovery (daemon/store/pool.c),
-- which holds and resends script calls only.
-- A completed row holds payload and lease_until as '' (complete.lua frees
-- them in the call that sets its state): they read as absent.
local row = call('HGETALL', row_key(ARGV[2]))
local out = {}
for i = 1, #row, 2 do
  local f = row[i]
  if row[i + 1] ~= '' or (f ~= 'payload' and f ~= 'lease_until') then
    out[#out + 1] = f
    out[#out + 1] = row[i + 1]
  end
end
return out
