-- enqueue_many: admit several jobs in one call, each on its own, in order.
-- KEYS:  none read (lib.lua builds every key from ARGV[1]).
-- ARGV:  1 prefix, then five per item: job id, group ('' = flat), payload
--        (JSON text), delay_ms (0 = now), max_attempts (0 = unlimited).
-- Returns one verdict per item, in input order: 1 (enqueued), 0
-- (duplicate: a row exists, nothing changed), {-1, cap, from} (refused:
-- its lane holds its cap, as enqueue.lua) or an error reply "ECODE
-- message" for that item alone (EKIND, EARG, EBRAND, as enqueue.lua).
--
-- Each item is exactly what enqueue.lua does for it without a hand-off:
-- its own duplicate check, its own row, no rollback of the items before
-- a refused one, so a batch cut into several calls (the daemon sends at
-- most STORE_ITEMS_PER_CALL items, and about STORE_BYTES_PER_CALL of
-- payloads, per call, to keep one call's Redis
-- time near a millisecond) means the same as one call. What a call
-- shares is its fixed cost: one FCALL, one begin(), one TIME (the items
-- of one call are created at the same server millisecond), and the
-- duplicate check: one EXISTS over all its items' rows. When it finds none
-- (a re-sent id is the exception), an item is a duplicate only of an
-- earlier item of the call, and each row is written with one HSET
-- (lib.lua: admit_row's fresh); otherwise each item asks on its own, as
-- enqueue.lua does.
if #ARGV < 6 or (#ARGV - 1) % 5 ~= 0 then
  return redis.error_reply('EARG five arguments per item expected')
end
local now = now_ms()
local now_s = int(now) -- every item's created_ms
local out, seen = {}, {} -- seen: lanes made non-empty by this call (to_backlog)
local fresh, rows = nil, {}
for i = 2, #ARGV, 5 do rows[#rows + 1] = row_key(ARGV[i]) end
-- At most 1000 keys (unpack's bound is Lua's C stack); the daemon sends 32.
if #rows <= 1000 and call('EXISTS', unpack(rows)) == 0 then fresh = {} end
for i = 2, #ARGV, 5 do
  local id, g = ARGV[i], ARGV[i + 1]
  local row = rows[#out + 1] -- out gets one verdict per item
  local st, err, cap_from = admit_row(id, g, ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], now, fresh,
                                      row, nil, now_s)
  if st == 'full' then
    out[#out + 1] = {-1, err, cap_from}
  elseif err then
    out[#out + 1] = {err = err}
  elseif st == 'duplicate' then
    out[#out + 1] = 0
  else
    if st == 'ready' then to_backlog(id, g, seen) end
    out[#out + 1] = 1
  end
end
return out
