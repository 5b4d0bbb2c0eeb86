-- The top of a board and the Redis clock, read in one atomic step: what a top-list snapshot is
-- taken from (leaderboard/services/derived.py) and what the live top list is read from when no
-- fresh snapshot can serve (leaderboard/selectors.py, board_top_read). Both therefore carry a
-- version on one clock, taken at the very state of the board they show.
-- KEYS[1] board; KEYS[2..3], when given, the board's guard keys (leaderboard/keys.py
-- board_intact, board_checked).
-- ARGV[1] count: entries from the top (0 or more).
-- Returns {seconds, microseconds, intact, {member, score, ...}}: the server's TIME at the read;
-- intact is 0, and the slice empty, when a guard key is missing (Redis may have lost the
-- board). The slice starts at rank 1: ranks follow from the scores (leaderboard/selectors.py).
if #KEYS < 1 or #KEYS > 3 or #ARGV ~= 1 or not tonumber(ARGV[1]) then
  return redis.error_reply('board_top: expected 1 to 3 keys and 1 argument (count), got '
    .. #KEYS .. ' keys and ' .. #ARGV .. ' arguments (caller and script of different versions?)')
end
local now = redis.call('TIME')
if keys_missing(2) then
  return {now[1], now[2], 0, {}}
end
local count = tonumber(ARGV[1])
local range = {}
if count > 0 then
  range = redis.call('ZREVRANGE', KEYS[1], 0, count - 1, 'WITHSCORES')
end
return {now[1], now[2], 1, range}
