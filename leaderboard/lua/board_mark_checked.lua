-- Mark a board checked on THIS Redis process: compared with PostgreSQL (or rebuilt from it)
-- since the server started. The key is written with replication off, so it reaches neither
-- the AOF nor the replicas: a restart (from an AOF that may lack its last second) or a
-- failover to a replica (that may lag) comes back without it, and the board's reads answer
-- 503 until the recovery has checked the board again (leaderboard/services/recovery.py).
-- KEYS[1] the board's checked key (leaderboard/keys.py board_checked). No ARGV.
if #KEYS ~= 1 or #ARGV ~= 0 then
  return redis.error_reply('board_mark_checked: expected 1 key and no arguments, got '
    .. #KEYS .. ' and ' .. #ARGV)
end
redis.set_repl(redis.REPL_NONE)
redis.call('SET', KEYS[1], '1')
return 1
