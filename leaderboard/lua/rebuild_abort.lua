-- Give up a rebuild: the live board stays as it is; the next rebuild starts clean.
-- KEYS: marker, pending, delta, temp (a board with tie-break columns: then the temp's index).
redis.call('UNLINK', unpack(KEYS))
return 1
