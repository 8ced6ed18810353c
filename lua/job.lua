-- job: read one job's row.
-- flags: no-writes (it only reads; Redis refuses a write; scripts/embed_lua.py)
-- KEYS:  the standard ten (lib.lua).
-- ARGV:  1 prefix, 2 job id (checked by the daemon: a JOB id)
-- Returns the row as HGETALL does (field, value, ...); empty if none.
--
-- A script rather than a plain HGETALL so that it runs in order with the
-- queue's other calls even across a NOSCRIPT recovery (daemon/store/pool.c),
-- which holds and resends script calls only.
return call('HGETALL', row_key(ARGV[2]))
