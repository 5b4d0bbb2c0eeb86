-- Start rebuilding a board: take the marker (it doubles as the rebuild's lock) as "pending",
-- after clearing what a crashed earlier rebuild may have left.
-- KEYS: marker, pending, delta, temp. ARGV: marker ttl seconds.
-- Returns 1, or 0 when another rebuild of this board is running.
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
redis.call('UNLINK', KEYS[2], KEYS[3], KEYS[4])
redis.call('SET', KEYS[1], 'pending', 'EX', tonumber(ARGV[1]))
return 1
