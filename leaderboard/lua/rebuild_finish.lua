-- Finish a rebuild atomically: merge what is left of the delta, put the temp board in place of
-- the live one (readers see the old board, then the new one, never an empty or partial one),
-- and end the rebuild. An empty result deletes the live board.
-- KEYS: temp, live, marker, pending, delta.
-- ARGV: snapshot text, rule, time_bits, max_points, ttl ms for a board that had none live (0: none).
-- Returns {the new board's size, members left off...} (a cumulative sum that would overflow
-- the codec takes the member off the board, as in rebuild_merge_delta.lua).
local snap = ARGV[1]
local rule = ARGV[2]
local time_bits = tonumber(ARGV[3])
local max_points = tonumber(ARGV[4])
local max_ticks = 2 ^ time_bits - 1
if redis.call('GET', KEYS[3]) ~= snap then
  return redis.error_reply('rebuild marker lost or replaced: writes may have been missed, rebuild again')
end
local left_off = {}
local rest = redis.call('ZRANGE', KEYS[5], 0, -1, 'WITHSCORES')
for i = 1, #rest, 2 do
  local points, low = split_score(tonumber(rest[i + 1]), time_bits)
  local r = merge_into(KEYS[1], rest[i], points, max_ticks - low, rule, time_bits, max_points)
  if type(r) == 'string' then
    redis.call('ZREM', KEYS[1], rest[i])
    left_off[#left_off + 1] = rest[i]
  end
end
-- A daily board keeps the expiry it had; one rebuilt from nothing gets the default.
local ttl = redis.call('PTTL', KEYS[2])
if ttl < 0 then
  ttl = tonumber(ARGV[5])
end
local size = redis.call('ZCARD', KEYS[1])
-- UNLINK, never an implicit delete: RENAME over a live board of millions of members would free
-- the old one inside this call and block Redis for seconds (seen at 10M members). UNLINK frees
-- it on a background thread; the script stays atomic, so no reader sees the key missing.
if size > 0 then
  redis.call('UNLINK', KEYS[2])
  redis.call('RENAME', KEYS[1], KEYS[2])
  if ttl > 0 then
    redis.call('PEXPIRE', KEYS[2], ttl)
  else
    redis.call('PERSIST', KEYS[2])
  end
else
  redis.call('UNLINK', KEYS[1], KEYS[2])
end
redis.call('UNLINK', KEYS[3], KEYS[4], KEYS[5])
local reply = {size}
for _, member in ipairs(left_off) do
  reply[#reply + 1] = member
end
return reply
