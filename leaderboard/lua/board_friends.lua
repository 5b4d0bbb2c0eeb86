-- Several players' scores and global ranks in one round trip (the friends board).
-- KEYS[1] board; ARGV the members. Returns {member, score, rank, ...} for the members that
-- have a score, in argument order; ranks are competition ranks on the composite score.
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
