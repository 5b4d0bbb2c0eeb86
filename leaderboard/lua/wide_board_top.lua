-- board_top.lua for a board with tie-break columns: its top and the Redis clock in one step.
-- KEYS[1] the board's sorted set; KEYS[2..3], when given, its guard keys.
-- ARGV[1] count: entries from the top (0 or more).
-- Returns {seconds, microseconds, intact, {member, ...}} (members are key .. player; ranks
-- follow from the keys, as board_top.lua's from the scores).
if #KEYS < 1 or #KEYS > 3 or #ARGV ~= 1 or not tonumber(ARGV[1]) then
  return redis.error_reply('wide_board_top: expected 1 to 3 keys and 1 argument (count), got '
    .. #KEYS .. ' keys and ' .. #ARGV .. ' arguments (caller and script of different versions?)')
end
local now = redis.call('TIME')
if keys_missing(2) then
  return {now[1], now[2], 0, {}}
end
local count = tonumber(ARGV[1])
local range = {}
if count > 0 then
  range = redis.call('ZRANGE', KEYS[1], 0, count - 1)
end
return {now[1], now[2], 1, range}
