-- A board's number of players, for the boards list, only while Redis holds the board as truth.
-- KEYS[1] board; KEYS[2] the board's recovery lock (leaderboard/keys.py board_recovering);
-- KEYS[3..4], when given, its guard keys (board_intact, board_checked: a closed season's board
-- has none). No ARGV.
-- Returns the board's ZCARD, or -1 while a recovery holds the lock or a guard key is missing:
-- the board may then be empty or partial, and its size is not known (never a false 0).
-- One script, so the checks and the count see one board state.
if #KEYS < 2 or #KEYS > 4 or #ARGV ~= 0 then
  return redis.error_reply('board_size: expected 2 to 4 keys and no arguments, got '
    .. #KEYS .. ' and ' .. #ARGV)
end
if redis.call('EXISTS', KEYS[2]) == 1 then
  return -1
end
if keys_missing(3) then
  return -1
end
return redis.call('ZCARD', KEYS[1])
