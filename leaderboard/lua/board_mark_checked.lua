-- Mark a board checked on THIS Redis process: compared with PostgreSQL (or rebuilt from it)
-- since the server started. The key holds the process's run id ('run:<id>'), which the read
-- scripts compare with their own (common.lua keys_missing): written with replication off it
-- reaches neither the AOF stream nor the replicas, and when a copy of memory does (an AOF
-- rewrite, an RDB snapshot, a replica's full resync), the restarted or promoted server has
-- another run id, so the board's reads answer 503 until the recovery has checked it again
-- (leaderboard/services/recovery.py).
-- KEYS[1] the board's checked key (leaderboard/keys.py board_checked). No ARGV.
if #KEYS ~= 1 or #ARGV ~= 0 then
  return redis.error_reply('board_mark_checked: expected 1 key and no arguments, got '
    .. #KEYS .. ' and ' .. #ARGV)
end
redis.set_repl(redis.REPL_NONE)
redis.call('SET', KEYS[1], checked_value())
return 1
