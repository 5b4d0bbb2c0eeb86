-- rebuild_finish.lua for a board with tie-break columns: merge what is left of the delta, put
-- the temp board and its index in place of the live ones atomically, and end the rebuild.
-- KEYS: temp, temp index, live, live index, marker, pending, delta, done.
-- ARGV: snapshot text, the wide spec (rule, orders, tick_digits), ttl ms for a board that had
-- none live (0: none), ttl seconds of the done key.
-- Returns {the new board's size, players left off...} (as rebuild_finish.lua).
local snap = ARGV[1]
local rule, orders, tick_digits = ARGV[2], ARGV[3], tonumber(ARGV[4])
local spec_error = check_wide_spec(rule, orders, tick_digits)
if spec_error or #ARGV ~= 6 or #KEYS ~= 8 then
  return redis.error_reply('wide_rebuild_finish: expected 8 keys and 6 arguments, got '
    .. #KEYS .. ' and ' .. #ARGV .. (spec_error and (' (' .. spec_error .. ')') or ''))
end
local temp, temp_index, live, live_index = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
if redis.call('GET', KEYS[5]) ~= snap then
  return redis.error_reply('rebuild marker lost or replaced: writes may have been missed, rebuild again')
end
local left_off = {}
local rest = redis.call('HGETALL', KEYS[7])
for i = 1, #rest, 2 do
  local values, ticks = wide_decode(rest[i + 1], orders)
  local r = wide_merge_into(temp, temp_index, rest[i], values, ticks, rule, orders, tick_digits)
  if type(r) == 'string' then
    wide_remove(temp, temp_index, rest[i])
    left_off[#left_off + 1] = rest[i]
  end
end
-- A daily board keeps the expiry it had; one rebuilt from nothing gets the default.
local ttl = redis.call('PTTL', live)
if ttl < 0 then
  ttl = tonumber(ARGV[5])
end
local size = redis.call('ZCARD', temp)
-- UNLINK before RENAME, as rebuild_finish.lua: never free a large old board in this call.
redis.call('UNLINK', live, live_index)
if size > 0 then
  redis.call('RENAME', temp, live)
  redis.call('RENAME', temp_index, live_index)
  if ttl > 0 then
    redis.call('PEXPIRE', live, ttl)
    redis.call('PEXPIRE', live_index, ttl)
  else
    redis.call('PERSIST', live)
    redis.call('PERSIST', live_index)
  end
else
  redis.call('UNLINK', temp, temp_index)
end
redis.call('UNLINK', KEYS[5], KEYS[6], KEYS[7])
redis.call('SET', KEYS[8], snap, 'EX', tonumber(ARGV[6]))
local reply = {size}
for _, member in ipairs(left_off) do
  reply[#reply + 1] = member
end
return reply
