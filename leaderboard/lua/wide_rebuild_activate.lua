-- rebuild_activate.lua for a board with tie-break columns: the rebuild has its snapshot; the
-- marker holds it from now on, and the pending results the snapshot cannot see go to the
-- delta (a hash player -> wide key, merged per rule).
-- KEYS: marker, pending, delta.
-- ARGV: snapshot text, the wide spec (rule, orders, tick_digits), ttl seconds.
-- Returns how many pending entries went to the delta.
local snap = ARGV[1]
local rule, orders, tick_digits = ARGV[2], ARGV[3], tonumber(ARGV[4])
local spec_error = check_wide_spec(rule, orders, tick_digits)
if spec_error or #ARGV ~= 5 or #KEYS ~= 3 then
  return redis.error_reply('wide_rebuild_activate: expected 3 keys and 5 arguments, got '
    .. #KEYS .. ' and ' .. #ARGV .. (spec_error and (' (' .. spec_error .. ')') or ''))
end
if redis.call('GET', KEYS[1]) ~= 'pending' then
  return redis.error_reply('rebuild marker lost before activation')
end
local moved = 0
for _, entry in ipairs(redis.call('LRANGE', KEYS[2], 0, -1)) do
  local xid, member, key = string.match(entry, '^(%d+) (%S+) (%x+)$')
  if xid == nil or #key ~= 8 * #orders + tick_digits then
    return redis.error_reply('malformed rebuild pending entry: ' .. entry)
  end
  if not xid_visible(tonumber(xid), snap) then
    local values, ticks = wide_decode(key, orders)
    local r = wide_merge_into(false, KEYS[3], member, values, ticks, rule, orders, tick_digits)
    if type(r) == 'string' then
      return redis.error_reply(r)
    end
    moved = moved + 1
  end
end
redis.call('DEL', KEYS[2])
redis.call('SET', KEYS[1], snap, 'EX', tonumber(ARGV[5]))
return moved
