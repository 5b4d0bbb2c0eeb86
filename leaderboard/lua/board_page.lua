-- A slice of a board by position, with the competition rank of its first entry.
-- KEYS[1] board; ARGV[1] start, ARGV[2] stop (0-based positions, inclusive, descending).
-- Returns {first_rank, {member, score, member, score, ...}}; first_rank is 0 when empty.
--
-- Ranks follow the composite score only: entries with an identical score share a rank
-- (1 + the number of strictly higher scores), so Redis's member-lexical order among exact
-- ties never decides a rank. Inside the slice the caller derives the others: an entry whose
-- score differs from the previous one has rank = position + 1.
-- KEYS[2..], when given, are the board's guard keys (leaderboard/keys.py board_intact and
-- board_checked): without one of them Redis may have lost the board or hold it stale, and the
-- script answers -1 instead of a board it cannot vouch for.
if keys_missing(2) then
  return -1
end
local range = redis.call('ZREVRANGE', KEYS[1], ARGV[1], ARGV[2], 'WITHSCORES')
if #range == 0 then
  return {0, range}
end
local first_rank = redis.call('ZCOUNT', KEYS[1], '(' .. range[2], '+inf') + 1
return {first_rank, range}
