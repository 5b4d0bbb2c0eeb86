-- The name cache: set players' fields in one bucket hash, each only for a newer revision.
-- KEYS[1] the bucket (leaderboard/keys.py player_names). ARGV: pairs of (player id, value),
-- value = "<revision>:<rest>" (leaderboard/player_names.py).
-- A field is written only when its stored revision is lower (or absent): a writer that read
-- PostgreSQL before a staff hide and writes after it never brings the hidden name back.
-- Returns the number of fields written.
if #KEYS ~= 1 or #ARGV == 0 or #ARGV % 2 ~= 0 then
  return redis.error_reply('player_names_set: expected 1 key and (player, value) pairs, got '
    .. #KEYS .. ' keys and ' .. #ARGV .. ' arguments')
end
local written = 0
for i = 1, #ARGV, 2 do
  local revision = tonumber(string.match(ARGV[i + 1], '^(%d+):'))
  if not revision then
    return redis.error_reply('player_names_set: value without a revision: ' .. ARGV[i + 1])
  end
  local stored = redis.call('HGET', KEYS[1], ARGV[i])
  local stored_revision = stored and tonumber(string.match(stored, '^(%d+):')) or -1
  if stored_revision < revision then
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
    written = written + 1
  end
end
return written
