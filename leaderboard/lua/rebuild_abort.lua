-- Give up a rebuild: the live board stays as it is; the next rebuild starts clean.
-- KEYS: marker, pending, delta, temp.
redis.call('UNLINK', KEYS[1], KEYS[2], KEYS[3], KEYS[4])
return 1
