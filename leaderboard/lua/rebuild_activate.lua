-- The rebuild has its PostgreSQL snapshot: from now on the marker holds it, and writes the
-- snapshot cannot see go to the delta. Writes queued while "pending" are sorted the same way.
-- KEYS: marker, pending, delta.
-- ARGV: snapshot text, the board's spec (rule, order, time_bits, max_points), ttl seconds.
-- Returns how many pending entries went to the delta.
local snap = ARGV[1]
local rule, order = ARGV[2], ARGV[3]
local time_bits, max_points = tonumber(ARGV[4]), tonumber(ARGV[5])
local spec_error = check_spec(rule, order, time_bits, max_points)
if spec_error or #ARGV ~= 6 then
  return redis.error_reply('rebuild_activate: expected 6 arguments, got ' .. #ARGV
    .. (spec_error and (' (' .. spec_error .. ')') or ''))
end
if redis.call('GET', KEYS[1]) ~= 'pending' then
  return redis.error_reply('rebuild marker lost before activation')
end
local moved = 0
for _, entry in ipairs(redis.call('LRANGE', KEYS[2], 0, -1)) do
  local xid, member, points, ticks = string.match(entry, '^(%d+) (%S+) (%d+) (%d+)$')
  if xid == nil then
    return redis.error_reply('malformed rebuild pending entry: ' .. entry)
  end
  if not xid_visible(tonumber(xid), snap) then
    local r = merge_into(KEYS[3], member, tonumber(points), tonumber(ticks), rule, order, time_bits, max_points)
    if type(r) == 'string' then
      return redis.error_reply(r)
    end
    moved = moved + 1
  end
end
redis.call('DEL', KEYS[2])
redis.call('SET', KEYS[1], snap, 'EX', tonumber(ARGV[6]))
return moved
