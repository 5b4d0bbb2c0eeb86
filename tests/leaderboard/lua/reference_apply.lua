-- A reference of the ingestion side of the rebuild protocol, for the rebuild's own tests
-- (the ingestion engineer's apply script is the production one).
-- KEYS: board, marker, pending, delta. ARGV: member, points, ticks, xid, rule, time_bits, max_points.
local member = ARGV[1]
local points = tonumber(ARGV[2])
local ticks = tonumber(ARGV[3])
local xid = tonumber(ARGV[4])
local rule = ARGV[5]
local time_bits = tonumber(ARGV[6])
local max_points = tonumber(ARGV[7])
local r = merge_into(KEYS[1], member, points, ticks, rule, time_bits, max_points)
if type(r) == 'string' then
  return redis.error_reply(r)
end
local marker = redis.call('GET', KEYS[2])
if not marker then
  return r
end
if marker == 'pending' then
  redis.call('RPUSH', KEYS[3], ARGV[4] .. ' ' .. member .. ' ' .. ARGV[2] .. ' ' .. ARGV[3])
elseif not xid_visible(xid, marker) then
  r = merge_into(KEYS[4], member, points, ticks, rule, time_bits, max_points)
  if type(r) == 'string' then
    return redis.error_reply(r)
  end
end
return 1
