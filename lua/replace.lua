-- replace: one step of the walk that re-places every lane after a queue
-- default ceiling or rate changed (lib.lua:replace_begin, replace_step).
-- flags: allow-oom (it runs while Redis is out of memory; scripts/embed_lua.py)
-- The daemon sends steps right behind the limit or rate call that began
-- the walk, so the calls of its session that follow see every lane placed;
-- promote.lua runs steps too, so a walk is finished whoever began it.
-- A step with no walk in progress is one HGET.
-- KEYS:  none read (lib.lua builds every key from ARGV[1]).
-- ARGV:  1 prefix, 2 budget (lanes and groups per step, >= 1)
-- Returns 1 when no walk is left, 0 while it has steps to go.
local budget = tonumber(ARGV[2])
if not budget or budget < 1 then return redis.error_reply('EARG bad budget') end
if any_limit == nil then any_limit = call('EXISTS', K_GLIMIT) == 1 end
if not any_limit then return 1 end
return replace_step(budget) and 1 or 0
