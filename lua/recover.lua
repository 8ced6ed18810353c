-- recover: give back the leases of calls whose reply the daemon lost.
-- flags: allow-oom (it moves jobs back, adding nothing; scripts/embed_lua.py)
-- KEYS:  none read (lib.lua builds every key from ARGV[1]).
-- ARGV:  1 prefix, 2 cursor (ZSCAN's, '0' to start), 3 count (ZSCAN's
--        COUNT), 4.. the tags of the lost calls (each a leasing call's
--        ARGV tag, recorded as lease_by on the rows it leased)
-- Returns {next cursor ('0': done), leases given back by this call}.
--
-- A claim, stream pump or hand-off whose reply was lost leased its jobs
-- for nobody (daemon/store/lost.c). Each page of the queue's leases
-- (ZSCAN of the active index: bounded work per call, and every lease held
-- through the whole scan is seen) is checked row by row: an active row
-- whose lease_by is one of the tags was leased by a lost call and taken
-- by no one since (a later lease writes its own lease_by), so it goes
-- back to its backlog with its attempt returned (give_back in lib.lua).
-- The daemon runs this only once the lost connection is fenced (nothing
-- it sent can still run), so no lost call can lease after its page.
local lost = {}
for i = 4, #ARGV do lost[ARGV[i]] = true end
local page = call('ZSCAN', K_ACTIVE, ARGV[2], 'COUNT', ARGV[3])
local ids, given = page[2], 0
local now
for i = 1, #ids, 2 do
  local id = ids[i]
  local f = call('HMGET', row_key(id), 'state', 'lease_by', 'group')
  if f[1] == 'active' and f[2] and lost[f[2]] then
    now = now or now_ms()
    give_back(id, f[3] or '', now)
    given = given + 1
  end
end
return {page[1], given}
