-- Several players' scores and global ranks in one round trip (the friends board).
-- KEYS[1] board; ARGV the members. Returns {member, score, rank, ...} for the members that
-- have a score, in argument order; ranks are competition ranks on the composite score.
-- KEYS[2..], when given, are the board's guard keys (leaderboard/keys.py board_intact and
-- board_checked): without one of them Redis may have lost the board or hold it stale, and the
-- script answers -1 instead of a board it cannot vouch for.
if keys_missing(2) then
  return -1
end
local key = KEYS[1]
local out = {}
for i = 1, #ARGV do
  local score = redis.call('ZSCORE', key, ARGV[i])
  if score then
    out[#out + 1] = ARGV[i]
    out[#out + 1] = score
    out[#out + 1] = redis.call('ZCOUNT', key, '(' .. score, '+inf') + 1
  end
end
return out
