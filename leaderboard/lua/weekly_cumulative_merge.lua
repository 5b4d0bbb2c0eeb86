-- Merge one chunk of a (frozen copy of a) daily board into a weekly build key under the
-- cumulative rule: points add up, the time part is the latest (max ticks). A plain
-- ZUNIONSTORE ... SUM of encoded scores would add the time parts too and carry them into
-- the points, so the merge decodes each score instead.
-- KEYS[1] source (daily copy), KEYS[2] weekly build key;
-- ARGV[1] start, ARGV[2] stop (0-based, inclusive), ARGV[3] time_bits, ARGV[4] max_points.
-- Returns the number of entries merged, or an error reply when a sum overflows the codec.
local time_bits = tonumber(ARGV[3])
local max_points = tonumber(ARGV[4])
local max_ticks = 2 ^ time_bits - 1
local range = redis.call('ZRANGE', KEYS[1], ARGV[1], ARGV[2], 'WITHSCORES')
for i = 1, #range, 2 do
  local points, low = split_score(tonumber(range[i + 1]), time_bits)
  local result = merge_into(KEYS[2], range[i], points, max_ticks - low, 'cumulative', time_bits, max_points)
  if type(result) == 'string' then
    return redis.error_reply('player ' .. range[i] .. ': ' .. result)
  end
end
return #range / 2
