-- rebuild_merge_delta.lua for a board with tie-break columns: move about ARGV[1] players of
-- the delta (hash player -> key) into the freshly loaded temp board (rule merge). Ingestion
-- may keep adding to the delta meanwhile; a player merged and removed here and written again
-- later comes back holding only the new results, so nothing counts twice.
-- KEYS: delta, temp, temp index. ARGV: count, the wide spec (rule, orders, tick_digits).
-- Returns {the delta's remaining size, players left off...} (a cumulative value past the
-- maximum takes the player off the temp board, as the PostgreSQL read leaves them off).
local rule, orders, tick_digits = ARGV[2], ARGV[3], tonumber(ARGV[4])
local spec_error = check_wide_spec(rule, orders, tick_digits)
if spec_error or #ARGV ~= 4 or #KEYS ~= 3 then
  return redis.error_reply('wide_rebuild_merge_delta: expected 3 keys and 4 arguments, got '
    .. #KEYS .. ' and ' .. #ARGV .. (spec_error and (' (' .. spec_error .. ')') or ''))
end
local left_off = {}
local batch = redis.call('HSCAN', KEYS[1], 0, 'COUNT', tonumber(ARGV[1]))[2]
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
local reply = {redis.call('HLEN', KEYS[1])}
for _, member in ipairs(left_off) do
  reply[#reply + 1] = member
end
return reply
