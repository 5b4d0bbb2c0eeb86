-- Move up to ARGV[1] members of the delta into the freshly loaded temp board (rule merge).
-- Ingestion may keep adding to the delta meanwhile; a member merged and removed here and
-- written again later comes back holding only the new result, so nothing counts twice.
-- KEYS: delta, temp. ARGV: count, rule, time_bits, max_points.
-- Returns {the delta's remaining size, members left off...}: a member whose cumulative sum
-- would overflow the codec is taken off the temp board (the rebuild reports it; nothing is
-- clamped), as the rebuild's PostgreSQL read leaves off a player whose total overflows.
local rule = ARGV[2]
local time_bits = tonumber(ARGV[3])
local max_points = tonumber(ARGV[4])
local max_ticks = 2 ^ time_bits - 1
local left_off = {}
local batch = redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[1]) - 1, 'WITHSCORES')
for i = 1, #batch, 2 do
  local member = batch[i]
  local points, low = split_score(tonumber(batch[i + 1]), time_bits)
  local r = merge_into(KEYS[2], member, points, max_ticks - low, rule, time_bits, max_points)
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
