-- weekly_merge.lua for a board with tie-break columns, every rule: merge one HSCAN step of (a
-- frozen copy of) a daily board's index (player -> key) into a weekly build board.
-- best: the better whole key wins (the earlier time on an equal key); cumulative: every value
-- adds up, the time is the latest; latest: the caller merges the days newest first, and a
-- player keeps the first key met (the latest day's, which is that day's latest).
-- KEYS[1] source (copy of the daily index), KEYS[2] the build's sorted set, KEYS[3] its index.
-- ARGV[1] HSCAN cursor, ARGV[2] count, ARGV[3..5] the wide spec (rule, orders, tick_digits).
-- Returns {next cursor ("0": done), entries merged}, or an error reply when a sum passes the
-- maximum.
local rule, orders, tick_digits = ARGV[3], ARGV[4], tonumber(ARGV[5])
local spec_error = check_wide_spec(rule, orders, tick_digits)
if spec_error or #ARGV ~= 5 or #KEYS ~= 3 then
  return redis.error_reply('wide_weekly_merge: expected 3 keys and 5 arguments, got '
    .. #KEYS .. ' and ' .. #ARGV .. (spec_error and (' (' .. spec_error .. ')') or ''))
end
local step = redis.call('HSCAN', KEYS[1], ARGV[1], 'COUNT', tonumber(ARGV[2]))
local pairs_ = step[2]
for i = 1, #pairs_, 2 do
  local member, key = pairs_[i], pairs_[i + 1]
  if rule == 'latest' then
    if redis.call('HEXISTS', KEYS[3], member) == 0 then
      redis.call('ZADD', KEYS[2], 0, key .. member)
      redis.call('HSET', KEYS[3], member, key)
    end
  else
    local values, ticks = wide_decode(key, orders)
    local r = wide_merge_into(KEYS[2], KEYS[3], member, values, ticks, rule, orders, tick_digits)
    if type(r) == 'string' then
      return redis.error_reply('player ' .. member .. ': ' .. r)
    end
  end
end
return {step[1], #pairs_ / 2}
