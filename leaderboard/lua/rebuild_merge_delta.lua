-- Move up to ARGV[1] members of the delta into the freshly loaded temp board (rule merge).
-- Ingestion may keep adding to the delta meanwhile; a member merged and removed here and
-- written again later comes back holding only the new result, so nothing counts twice.
-- KEYS: delta, temp. ARGV: count, rule, time_bits, max_points.
-- Returns the delta's remaining size.
local rule = ARGV[2]
local time_bits = tonumber(ARGV[3])
local max_points = tonumber(ARGV[4])
local max_ticks = 2 ^ time_bits - 1
local batch = redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[1]) - 1, 'WITHSCORES')
for i = 1, #batch, 2 do
  local member = batch[i]
  local points, low = split_score(tonumber(batch[i + 1]), time_bits)
  local r = merge_into(KEYS[2], member, points, max_ticks - low, rule, time_bits, max_points)
  if type(r) == 'string' then
    return redis.error_reply(r)
  end
  redis.call('ZREM', KEYS[1], member)
end
return redis.call('ZCARD', KEYS[1])
