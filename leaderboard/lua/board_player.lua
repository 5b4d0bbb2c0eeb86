-- A player's standing and the entries around them, in one atomic read, so the player is
-- always inside their own window and every rank comes from the same board state.
-- KEYS[1] board; ARGV[1] member; ARGV[2] radius (-1: the standing only).
-- Returns nil when the member has no score, else
-- {rank, score, total, next_score|nil, window_start, window_first_rank, {member, score, ...}}
-- (window_start: the 0-based position of the window's first entry).
-- Scores are passed through as Redis formats them (%.17g: exact for integers below 2^53).
-- KEYS[2..], when given, are the board's guard keys (leaderboard/keys.py board_intact and
-- board_checked): without one of them Redis may have lost the board or hold it stale, and the
-- script answers -1 instead of a board it cannot vouch for.
if keys_missing(2) then
  return -1
end
local key = KEYS[1]
local member = ARGV[1]
local radius = tonumber(ARGV[2])
local position = redis.call('ZREVRANK', key, member)
if not position then
  return false
end
local score = redis.call('ZSCORE', key, member)
local rank = redis.call('ZCOUNT', key, '(' .. score, '+inf') + 1
local total = redis.call('ZCARD', key)
local next_score = false
if rank > 1 then
  -- The lowest score strictly above the player's: the rank they would move up to.
  next_score = redis.call('ZRANGEBYSCORE', key, '(' .. score, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)[2]
end
local window = {}
local window_first_rank = 0
local start = 0
if radius >= 0 then
  start = position - radius
  if start < 0 then
    start = 0
  end
  window = redis.call('ZREVRANGE', key, start, position + radius, 'WITHSCORES')
  window_first_rank = redis.call('ZCOUNT', key, '(' .. window[2], '+inf') + 1
end
return {rank, score, total, next_score, start, window_first_rank, window}
