-- Does the board's checked key vouch for THIS Redis process? The recovery's look at every
-- open board (leaderboard/services/recovery.py boards_unchecked_get).
-- KEYS[1] the board's checked key (leaderboard/keys.py board_checked).
-- ARGV[1] '1' when a checked key of the older form (the value '1', no run id) is trusted: no
-- restart or failover since the recovery's last look; then it is stamped with this process's
-- run id. '0' otherwise.
-- Returns 1 when the board is checked on this process; 0 when it is not, after deleting a key
-- stamped by another process (copied by an AOF rewrite, a snapshot or a resync) or an untrusted
-- old one, so reads answer 503 until the board is compared again.
if #KEYS ~= 1 or #ARGV ~= 1 or (ARGV[1] ~= '0' and ARGV[1] ~= '1') then
  return redis.error_reply('board_checked_verify: expected 1 key and 1 argument (0 or 1), got '
    .. #KEYS .. ' and ' .. #ARGV)
end
local value = redis.call('GET', KEYS[1])
if not value then
  return 0
end
local mine = checked_value()
if value == mine then
  return 1
end
redis.set_repl(redis.REPL_NONE)
if value == '1' and ARGV[1] == '1' then
  redis.call('SET', KEYS[1], mine)
  return 1
end
redis.call('DEL', KEYS[1])
return 0
