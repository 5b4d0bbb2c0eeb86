-- Publish a finished weekly build: RENAME it over the weekly board with its expiry, or drop
-- the weekly board when the build is empty (no result that week). Readers see the old board
-- or the new one, never a half-built one.
-- KEYS[1] build key, KEYS[2] weekly board; ARGV[1] expiry in seconds. Returns the board size.
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('UNLINK', KEYS[2])
  return 0
end
-- UNLINK first: RENAME's implicit delete of a big old board would block Redis (see
-- rebuild_finish.lua); UNLINK frees it on a background thread, and the script stays atomic.
redis.call('UNLINK', KEYS[2])
redis.call('RENAME', KEYS[1], KEYS[2])
redis.call('EXPIRE', KEYS[2], ARGV[1])
return redis.call('ZCARD', KEYS[2])
