-- A recovery's last step: mark the board intact, and checked on THIS Redis process
-- (board_mark_checked.lua), only if the recovery still holds its lock. A loss during the run
-- (a FLUSHALL, the board's keys deleted) takes the lock with the board's other keys, and with
-- them what the run rebuilt before it: marked intact, that board would be served as truth
-- with nothing left to repair it. Unmarked, it stays lost and the next look recovers it again.
-- The check and the marks in one call, so no loss falls between them.
-- KEYS[1] the board's recovery lock (leaderboard/keys.py board_recovering)
-- KEYS[2] the board's intact key (board_intact)
-- KEYS[3] the board's checked key (board_checked)
-- ARGV[1] the lock's token, as the recovery took it (redis-py's Lock)
-- Returns 1 when marked, 0 when the lock is gone or another run's.
if #KEYS ~= 3 or #ARGV ~= 1 then
  return redis.error_reply('board_recovered_mark: expected 3 keys and 1 argument, got '
    .. #KEYS .. ' and ' .. #ARGV)
end
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('SET', KEYS[2], '1')
redis.set_repl(redis.REPL_NONE)
redis.call('SET', KEYS[3], checked_value())
return 1
