-- Finish a rebuild atomically: merge what is left of the delta, put the temp board in place of
-- the live one (readers see the old board, then the new one, never an empty or partial one),
-- and end the rebuild. An empty result deletes the live board.
-- KEYS: temp, live, marker, pending, delta, done.
-- ARGV: snapshot text, the board's spec (rule, order, time_bits, max_points), ttl ms for a
-- board that had none live (0: none), ttl seconds of the done key.
-- The snapshot stays in the done key: a result it could see is on the new board, so when the
-- consumer applies such a result only now (it stored it before the snapshot and was held up
-- between its PostgreSQL commit and its Redis write, e.g. by a Redis outage), apply_results
-- leaves it out instead of counting it twice.
-- Returns {the new board's size, members left off...} (a cumulative sum that would overflow
-- the codec takes the member off the board, as in rebuild_merge_delta.lua).
local snap = ARGV[1]
local rule, order = ARGV[2], ARGV[3]
local time_bits, max_points = tonumber(ARGV[4]), tonumber(ARGV[5])
local spec_error = check_spec(rule, order, time_bits, max_points)
if spec_error or #ARGV ~= 7 or #KEYS ~= 6 then
  return redis.error_reply('rebuild_finish: expected 6 keys and 7 arguments, got ' .. #KEYS
    .. ' and ' .. #ARGV
    .. (spec_error and (' (' .. spec_error .. ')') or ''))
end
if redis.call('GET', KEYS[3]) ~= snap then
  return redis.error_reply('rebuild marker lost or replaced: writes may have been missed, rebuild again')
end
local left_off = {}
local rest = redis.call('ZRANGE', KEYS[5], 0, -1, 'WITHSCORES')
for i = 1, #rest, 2 do
  local points, ticks = decode_score(tonumber(rest[i + 1]), order, time_bits, max_points)
  local r = merge_into(KEYS[1], rest[i], points, ticks, rule, order, time_bits, max_points)
  if type(r) == 'string' then
    redis.call('ZREM', KEYS[1], rest[i])
    left_off[#left_off + 1] = rest[i]
  end
end
-- A daily board keeps the expiry it had; one rebuilt from nothing gets the default.
local ttl = redis.call('PTTL', KEYS[2])
if ttl < 0 then
  ttl = tonumber(ARGV[6])
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
redis.call('SET', KEYS[6], snap, 'EX', tonumber(ARGV[7]))
local reply = {size}
for _, member in ipairs(left_off) do
  reply[#reply + 1] = member
end
return reply
