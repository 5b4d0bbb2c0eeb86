-- The rank_changed events of a correction (a void, a ban, an unban) for the players it
-- concerns on ONE board, around the rebuild that applies it (leaderboard/services/events.py).
--
-- "begin", before the rebuild: each player's standing now (rank and points, or none) is kept
-- in the pending hash, unless a begin of the same correction kept it already (a retried task
-- keeps the standing from before the correction, not one its first try half rebuilt).
-- "end", after the rebuild: each player whose kept standing differs from the one now gets a
-- rank_changed event in the board's corrections outbox, and leaves the pending hash, in this
-- one call: an event is written once, and published from the outbox (at least once).
--
-- KEYS[1]    the board's sorted set
-- KEYS[2]    its index hash (a board with tie-break columns; else any key of the slot, unused)
-- KEYS[3]    the pending hash: "<cause>/<player>" -> "<rank> <points>" or "-" (none)
-- KEYS[4]    stream: the board's corrections outbox
-- KEYS[5]    the board's intact key (absent: Redis lost the board; nothing is kept or emitted)
-- ARGV[1]    "begin" or "end"
-- ARGV[2]    "plain" or "wide"
-- ARGV[3..5] plain: order, time_bits, max_points; wide: orders, key length, "" (unused)
-- ARGV[6..8] the season id, the board's slug, the board id
-- ARGV[9]    number of players m, then per player four arguments: player id, cause (e.g.
--            "void:123"; ids are "<cause>:<board id>:rank_changed:<player>"), match id ("-":
--            none), time (unix seconds)
-- Returns {outbox_id, events}: the stream entry written ("" when none) and its text (common.lua).

local mode, kind = ARGV[1], ARGV[2]
local count = tonumber(ARGV[9])
if (mode ~= 'begin' and mode ~= 'end') or (kind ~= 'plain' and kind ~= 'wide') or #KEYS ~= 5
    or not count or #ARGV ~= 9 + 4 * count then
  return redis.error_reply('correction_events: expected mode begin|end, kind plain|wide, 5 keys '
    .. 'and 9 + 4m arguments, got ' .. tostring(mode) .. ', ' .. tostring(kind) .. ', ' .. #KEYS
    .. ' and ' .. #ARGV .. ' (caller and script of different versions?)')
end
if redis.call('EXISTS', KEYS[5]) == 0 then
  return {'', ''}
end
local zset, index, pending, outbox = KEYS[1], KEYS[2], KEYS[3], KEYS[4]

-- The player's rank and points now, or nil.
local standing
if kind == 'plain' then
  local order, time_bits, max_points = ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
  standing = function(player)
    local score = redis.call('ZSCORE', zset, player)
    if not score then
      return nil
    end
    local rank = redis.call('ZCOUNT', zset, '(' .. score, '+inf') + 1
    return rank, (decode_score(tonumber(score), order, time_bits, max_points))
  end
else
  local orders = ARGV[3]
  standing = function(player)
    local key = redis.call('HGET', index, player)
    if not key then
      return nil
    end
    local rank = redis.call('ZLEXCOUNT', zset, '-', '(' .. key) + 1
    return rank, (wide_decode(key, orders))[1]
  end
end

local events = nil
for n = 0, count - 1 do
  local player, cause = ARGV[10 + 4 * n], ARGV[11 + 4 * n]
  local field = cause .. '/' .. player
  if mode == 'begin' then
    if redis.call('HEXISTS', pending, field) == 0 then
      local rank, points = standing(player)
      redis.call('HSET', pending, field, rank and (rank .. ' ' .. points) or '-')
    end
  else
    local kept = redis.call('HGET', pending, field)
    if kept then
      local rank, points = standing(player)
      local old_rank, old_points = string.match(kept, '^(%d+) (%d+)$')
      old_rank, old_points = tonumber(old_rank), tonumber(old_points)
      if old_rank ~= rank then
        events = events or rank_events_new(
          '', ARGV[6], ARGV[7])
        rank_event(events, 'rank_changed', player, rank, old_rank, points, old_points, nil,
          {cause .. ':' .. ARGV[8], ARGV[12 + 4 * n], ARGV[13 + 4 * n]})
      end
      redis.call('HDEL', pending, field)
    end
  end
end
if mode == 'begin' then
  -- A correction whose end never comes (its task given up) leaves nothing for ever.
  redis.call('EXPIRE', pending, 7 * 86400)
  return {'', ''}
end
local payload = rank_events_payload(events)
if payload == '' then
  return {'', ''}
end
return {redis.call('XADD', outbox, '*', 'events', payload), payload}
