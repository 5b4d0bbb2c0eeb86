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
-- The scores in one ZMSCORE per CHUNK members, not a ZSCORE each: a call from Lua costs about
-- a microsecond whatever it does, and a cohort's read asks for up to 1,000 members.
local CHUNK = 500
for first = 1, #ARGV, CHUNK do
  local last = math.min(first + CHUNK - 1, #ARGV)
  local scores = redis.call('ZMSCORE', key, unpack(ARGV, first, last))
  for i = first, last do
    local score = scores[i - first + 1]
    if score then
      out[#out + 1] = ARGV[i]
      out[#out + 1] = score
      out[#out + 1] = redis.call('ZCOUNT', key, '(' .. score, '+inf') + 1
    end
  end
end
return out
