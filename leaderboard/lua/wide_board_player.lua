-- board_player.lua for a board with tie-break columns: a player's standing and the entries
-- around them in one atomic read.
-- KEYS[1] the board's sorted set, KEYS[2] its index hash (player -> key); KEYS[3..], when
-- given, its guard keys. ARGV[1] member (player id); ARGV[2] radius (-1: the standing only).
-- Returns -1 when a guard key is missing, nil when the player has no key, else
-- {rank, key, total, next_key|nil, window_start, window_first_rank, {member, ...}}
-- (next_key: the worst key strictly better than the player's).
if #KEYS < 2 or #ARGV ~= 2 or not tonumber(ARGV[2]) then
  return redis.error_reply('wide_board_player: expected 2+ keys and 2 arguments, got '
    .. #KEYS .. ' and ' .. #ARGV)
end
if keys_missing(3) then
  return -1
end
local zset, member, radius = KEYS[1], ARGV[1], tonumber(ARGV[2])
local key = redis.call('HGET', KEYS[2], member)
if not key then
  return false
end
local klen = #key
local position = redis.call('ZRANK', zset, key .. member)
if not position then
  return redis.error_reply('wide_board_player: the index names a key the board does not hold '
    .. 'for player ' .. member)
end
local rank = redis.call('ZLEXCOUNT', zset, '-', '(' .. key) + 1
local total = redis.call('ZCARD', zset)
local next_key = false
if rank > 1 then
  next_key = string.sub(redis.call('ZRANGE', zset, rank - 2, rank - 2)[1], 1, klen)
end
local window = {}
local window_first_rank = 0
local start = 0
if radius >= 0 then
  start = position - radius
  if start < 0 then
    start = 0
  end
  window = redis.call('ZRANGE', zset, start, position + radius)
  window_first_rank = redis.call('ZLEXCOUNT', zset, '-', '(' .. string.sub(window[1], 1, klen)) + 1
end
return {rank, key, total, next_key, start, window_first_rank, window}
