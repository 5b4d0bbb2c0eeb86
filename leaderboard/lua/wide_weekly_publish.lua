-- weekly_publish.lua for a board with tie-break columns: RENAME the finished build and its
-- index over the weekly board and its index, with their expiry, or drop the weekly board when
-- the build is empty.
-- KEYS[1] build, KEYS[2] build index, KEYS[3] weekly board, KEYS[4] its index.
-- ARGV[1] expiry in seconds. Returns the board size.
if #KEYS ~= 4 or #ARGV ~= 1 then
  return redis.error_reply('wide_weekly_publish: expected 4 keys and 1 argument, got '
    .. #KEYS .. ' and ' .. #ARGV)
end
redis.call('UNLINK', KEYS[3], KEYS[4])
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('UNLINK', KEYS[2])
  return 0
end
redis.call('RENAME', KEYS[1], KEYS[3])
redis.call('RENAME', KEYS[2], KEYS[4])
redis.call('EXPIRE', KEYS[3], ARGV[1])
redis.call('EXPIRE', KEYS[4], ARGV[1])
return redis.call('ZCARD', KEYS[3])
