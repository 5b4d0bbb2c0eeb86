-- Start rebuilding a board: take the marker (it doubles as the rebuild's lock) as "pending",
-- after clearing what a crashed earlier rebuild may have left.
-- KEYS: marker, pending, delta, temp (a board with tie-break columns: then the temp's index).
-- ARGV: marker ttl seconds.
-- Returns 1, or 0 when another rebuild of this board is running.
if #KEYS < 4 or #KEYS > 5 or #ARGV ~= 1 then
  return redis.error_reply('rebuild_begin: expected 4 or 5 keys and 1 argument, got '
    .. #KEYS .. ' and ' .. #ARGV)
end
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
redis.call('UNLINK', unpack(KEYS, 2))
redis.call('SET', KEYS[1], 'pending', 'EX', tonumber(ARGV[1]))
return 1
