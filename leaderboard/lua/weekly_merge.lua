-- Merge one chunk of a (frozen copy of a) daily board into a weekly build key, for the rules
-- a ZUNIONSTORE cannot express (best uses ZUNIONSTORE ... AGGREGATE MAX instead):
-- cumulative: points add up and the time part is the latest (a plain ZUNIONSTORE ... SUM of
--   encoded scores would add the time parts too and carry them into the points, so the merge
--   decodes each score instead);
-- latest: the caller merges the days newest first, and a player keeps the first value met
--   (ZADD NX): the latest day's value, which is the latest of that day.
-- KEYS[1] source (daily copy), KEYS[2] weekly build key;
-- ARGV[1] start, ARGV[2] stop (0-based, inclusive), ARGV[3..6] the board's spec (rule, order,
-- time_bits, max_points).
-- Returns the number of entries merged, or an error reply when a sum overflows the codec.
local rule, order = ARGV[3], ARGV[4]
local time_bits, max_points = tonumber(ARGV[5]), tonumber(ARGV[6])
local spec_error = check_spec(rule, order, time_bits, max_points)
if spec_error or #ARGV ~= 6 or rule == 'best' then
  return redis.error_reply('weekly_merge: expected 6 arguments and the cumulative or latest rule, got '
    .. #ARGV .. ' arguments' .. (spec_error and (' (' .. spec_error .. ')') or ''))
end
local range = redis.call('ZRANGE', KEYS[1], ARGV[1], ARGV[2], 'WITHSCORES')
for i = 1, #range, 2 do
  if rule == 'latest' then
    redis.call('ZADD', KEYS[2], 'NX', range[i + 1], range[i])
  else
    local points, ticks = decode_score(tonumber(range[i + 1]), order, time_bits, max_points)
    local result = merge_into(KEYS[2], range[i], points, ticks, rule, order, time_bits, max_points)
    if type(result) == 'string' then
      return redis.error_reply('player ' .. range[i] .. ': ' .. result)
    end
  end
end
return #range / 2
