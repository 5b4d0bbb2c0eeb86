-- Move up to ARGV[1] members of the delta into the freshly loaded temp board (rule merge).
-- Ingestion may keep adding to the delta meanwhile; a member merged and removed here and
-- written again later comes back holding only the new result, so nothing counts twice.
-- KEYS: delta, temp. ARGV: count, the board's spec (rule, order, time_bits, max_points).
-- Returns {the delta's remaining size, members left off...}: a member whose cumulative sum
-- would overflow the codec is taken off the temp board (the rebuild reports it; nothing is
-- clamped), as the rebuild's PostgreSQL read leaves off a player whose total overflows.
local rule, order = ARGV[2], ARGV[3]
local time_bits, max_points = tonumber(ARGV[4]), tonumber(ARGV[5])
local spec_error = check_spec(rule, order, time_bits, max_points)
if spec_error or #ARGV ~= 5 then
  return redis.error_reply('rebuild_merge_delta: expected 5 arguments, got ' .. #ARGV
    .. (spec_error and (' (' .. spec_error .. ')') or ''))
end
local left_off = {}
local batch = redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[1]) - 1, 'WITHSCORES')
for i = 1, #batch, 2 do
  local member = batch[i]
  local points, ticks = decode_score(tonumber(batch[i + 1]), order, time_bits, max_points)
  local r = merge_into(KEYS[2], member, points, ticks, rule, order, time_bits, max_points)
  if type(r) == 'string' then
    redis.call('ZREM', KEYS[2], member)
    left_off[#left_off + 1] = member
  end
  redis.call('ZREM', KEYS[1], member)
end
local reply = {redis.call('ZCARD', KEYS[1])}
for _, member in ipairs(left_off) do
  reply[#reply + 1] = member
end
return reply
