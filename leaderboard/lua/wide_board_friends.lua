-- board_friends.lua for a board with tie-break columns: several players' keys and global
-- ranks in one round trip.
-- KEYS[1] the board's sorted set, KEYS[2] its index hash; KEYS[3..], when given, its guard
-- keys. ARGV the members. Returns -1 when a guard key is missing, else {member, key, rank, ...}
-- for the members on the board, in argument order.
if #KEYS < 2 then
  return redis.error_reply('wide_board_friends: expected 2+ keys, got ' .. #KEYS)
end
if keys_missing(3) then
  return -1
end
local out = {}
for i = 1, #ARGV do
  local key = redis.call('HGET', KEYS[2], ARGV[i])
  if key then
    out[#out + 1] = ARGV[i]
    out[#out + 1] = key
    out[#out + 1] = redis.call('ZLEXCOUNT', KEYS[1], '-', '(' .. key) + 1
  end
end
return out
