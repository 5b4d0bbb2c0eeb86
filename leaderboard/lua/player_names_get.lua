-- The name cache's values of players in several buckets, in one call (a single Redis only: each
-- bucket is a key of its own slot, which a cluster refuses in one script; leaderboard/
-- player_names.py pipelines HMGETs there).
-- KEYS        the buckets (leaderboard/keys.py player_names), each once
-- ARGV        per bucket in KEYS order: how many of its fields follow, then the fields (player
--             ids)
-- Returns every field's value in argument order (nil: no name cached), flattened.
local out = {}
local at = 1
for k = 1, #KEYS do
  local count = tonumber(ARGV[at])
  if not count or count < 1 or at + count > #ARGV then
    return redis.error_reply('player_names_get: bucket ' .. k .. ' of ' .. #KEYS
      .. ' has no valid field count at argument ' .. at .. ' (' .. #ARGV .. ' arguments; '
      .. 'caller and script of different versions?)')
  end
  local found = redis.call('HMGET', KEYS[k], unpack(ARGV, at + 1, at + count))
  for n = 1, count do
    -- false, not nil: a nil would end the reply's array there.
    out[#out + 1] = found[n] or false
  end
  at = at + count + 1
end
if at ~= #ARGV + 1 then
  return redis.error_reply('player_names_get: ' .. (#ARGV - at + 1) .. ' arguments past the '
    .. 'last of ' .. #KEYS .. ' buckets')
end
return out
