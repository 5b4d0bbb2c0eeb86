-- rebuild_merge_delta.lua for a board with tie-break columns: move about ARGV[1] players of
-- the delta (hash player -> key) into the freshly loaded temp board (rule merge). Ingestion
-- may keep adding to the delta meanwhile; a player merged and removed here and written again
-- later comes back holding only the new results, so nothing counts twice.
-- KEYS: delta, temp, temp index. ARGV: count, the wide spec (rule, orders, tick_digits), the
-- HSCAN cursor (0 first, then the one the last call returned).
-- Returns {the delta's remaining size, the next cursor, players left off...} (a cumulative
-- value past the maximum takes the player off the temp board, as the PostgreSQL read leaves
-- them off). The caller carries the cursor on: a scan from 0 at every call walks the buckets
-- earlier calls emptied (a hash shrinks only below 10% full), and past COUNT * 10 empty ones
-- HSCAN returns nothing, so the merge made no progress and the finish merged it all at once.
local rule, orders, tick_digits = ARGV[2], ARGV[3], tonumber(ARGV[4])
local spec_error = check_wide_spec(rule, orders, tick_digits)
if spec_error or #ARGV ~= 5 or #KEYS ~= 3 or not tonumber(ARGV[5]) then
  return redis.error_reply('wide_rebuild_merge_delta: expected 3 keys and 5 arguments (count, '
    .. 'rule, orders, tick digits, cursor), got ' .. #KEYS .. ' and ' .. #ARGV
    .. (spec_error and (' (' .. spec_error .. ')') or ''))
end
local left_off = {}
local scanned = redis.call('HSCAN', KEYS[1], ARGV[5], 'COUNT', tonumber(ARGV[1]))
local batch = scanned[2]
for i = 1, #batch, 2 do
  local member = batch[i]
  local values, ticks = wide_decode(batch[i + 1], orders)
  local r = wide_merge_into(KEYS[2], KEYS[3], member, values, ticks, rule, orders, tick_digits)
  if type(r) == 'string' then
    wide_remove(KEYS[2], KEYS[3], member)
    left_off[#left_off + 1] = member
  end
  redis.call('HDEL', KEYS[1], member)
end
local reply = {redis.call('HLEN', KEYS[1]), scanned[1]}
for _, member in ipairs(left_off) do
  reply[#reply + 1] = member
end
return reply
