-- Shared by every board script: leaderboard/scripts.py prepends this file to each script
-- before loading it, so the helpers below exist in every script's scope.
--
-- Numbers in Redis Lua are doubles: every integer up to 2^53 is exact, which is exactly the
-- codec's range. Never tostring() a score: Lua formats doubles with %.14g and would drop
-- digits. score_str() formats them with %.0f, exact for integers below 2^53.

local function score_str(score)
  return string.format('%.0f', score)
end

-- A board's scores depend on its spec: rule ('best' | 'latest' | 'cumulative'), order
-- ('desc' | 'asc'), time_bits and max_points. Every script that merges scores takes the four,
-- in this order, and checks them with check_spec.
local function check_spec(rule, order, time_bits, max_points)
  if rule ~= 'best' and rule ~= 'latest' and rule ~= 'cumulative' then
    return 'unknown rule ' .. tostring(rule)
  end
  if order ~= 'desc' and order ~= 'asc' then
    return 'unknown order ' .. tostring(order)
  end
  if not time_bits or not max_points then
    return 'time_bits and max_points must be numbers'
  end
  return nil
end

-- points and ticks -> the encoded score. An asc board stores max_points - points in the high
-- bits: Redis's descending order still puts the best first, and the earlier tick still wins.
local function encode_score(points, ticks, order, time_bits, max_points)
  local scale = 2 ^ time_bits
  local high = points
  if order == 'asc' then
    high = max_points - points
  end
  return high * scale + (scale - 1 - ticks)
end

-- The encoded score -> points, ticks (the inverse of encode_score).
local function decode_score(score, order, time_bits, max_points)
  local scale = 2 ^ time_bits
  local high = math.floor(score / scale)
  local points = high
  if order == 'asc' then
    points = max_points - high
  end
  return points, (scale - 1) - (score - high * scale)
end

-- The score a board must hold after one more result, per rule.
-- best: the better encoded score wins (higher in Redis's order; equal points: the earlier).
-- latest: the result replaces the value (ingestion sends only a player's latest result, as
--   PostgreSQL decides it; later deliveries in the same script are later results).
-- cumulative: points add up, the time part is the latest result's.
-- Returns nil when nothing changes, or false plus a reason when the sum overflows the codec.
local function merged_score(old, points, ticks, rule, order, time_bits, max_points)
  if rule == 'best' then
    local new = encode_score(points, ticks, order, time_bits, max_points)
    if old == nil or new > old then
      return new
    end
    return nil
  end
  if rule == 'latest' or old == nil then
    return encode_score(points, ticks, order, time_bits, max_points)
  end
  local old_points, old_ticks = decode_score(old, order, time_bits, max_points)
  local sum = old_points + points
  if sum > max_points then
    return false, 'cumulative points ' .. score_str(sum) .. ' exceed the codec maximum ' .. score_str(max_points)
  end
  if old_ticks > ticks then
    ticks = old_ticks
  end
  return encode_score(sum, ticks, order, time_bits, max_points)
end

-- Merge one (points, ticks) into member of key per rule. Returns 1 if the board changed,
-- 0 if not, or an error string.
local function merge_into(key, member, points, ticks, rule, order, time_bits, max_points)
  local current = redis.call('ZSCORE', key, member)
  local old = nil
  if current then
    old = tonumber(current)
  end
  local new, err = merged_score(old, points, ticks, rule, order, time_bits, max_points)
  if new == false then
    return err
  end
  if new == nil then
    return 0
  end
  redis.call('ZADD', key, score_str(new), member)
  return 1
end

-- Does any of KEYS[first..] not exist? The read scripts' guard keys: the board's intact key
-- (persisted: the board is whole) and its checked key (never persisted nor replicated: this
-- Redis process has compared the board with PostgreSQL since it started), so a board a
-- restart or a failover may have left stale answers 503 instead of a stale board.
local function keys_missing(first)
  for i = first, #KEYS do
    if redis.call('EXISTS', KEYS[i]) == 0 then
      return true
    end
  end
  return false
end

-- Is PostgreSQL transaction id `xid` visible in snapshot `snap` ("xmin:xmax:xip1,xip2,...",
-- the text of pg_current_snapshot())? Visible = committed before the snapshot was taken.
local function xid_visible(xid, snap)
  local xmin, xmax, xip = string.match(snap, '^(%d+):(%d+):(.*)$')
  xmin = tonumber(xmin)
  xmax = tonumber(xmax)
  if xid < xmin then
    return true
  end
  if xid >= xmax then
    return false
  end
  for running in string.gmatch(xip, '(%d+)') do
    if tonumber(running) == xid then
      return false
    end
  end
  return true
end

-- ---- wide keys (leaderboard/codec.py, WideKeyCodec) ----
-- A board with tie-break columns ranks by a key past 53 bits: a fixed-width hex string whose
-- byte order is the ranking order, best first (eight digits per value, a descending one stored
-- as WIDE_MAX - value; then the ticks in tick_digits digits). Its sorted set holds every member
-- at score 0 as key .. player, so ZRANK is the position; its index hash (leaderboard/keys.py
-- board_index) maps player -> key. A wide spec is (rule, orders, tick_digits): orders has one
-- letter per value, points first ('d' desc, 'a' asc). Every value fits a double exactly.

local WIDE_MAX = 2147483647

local function check_wide_spec(rule, orders, tick_digits)
  if rule ~= 'best' and rule ~= 'latest' and rule ~= 'cumulative' then
    return 'unknown rule ' .. tostring(rule)
  end
  if type(orders) ~= 'string' or not string.match(orders, '^[ad][ad][ad]?[ad]?$') then
    return 'orders must be 2 to 4 letters a/d, got ' .. tostring(orders)
  end
  if not tick_digits or tick_digits < 1 or tick_digits > 14 then
    return 'tick_digits must be 1..14, got ' .. tostring(tick_digits)
  end
  return nil
end

-- values (points first) and ticks -> the key. Callers check values are within 0..WIDE_MAX.
local function wide_encode(values, ticks, orders, tick_digits)
  local parts = {}
  for i = 1, #values do
    local v = values[i]
    if string.byte(orders, i) == 100 then  -- 'd'
      v = WIDE_MAX - v
    end
    parts[i] = string.format('%08x', v)
  end
  parts[#parts + 1] = string.format('%0' .. tick_digits .. 'x', ticks)
  return table.concat(parts)
end

-- The key -> values (points first), ticks.
local function wide_decode(key, orders)
  local values = {}
  local n = #orders
  for i = 1, n do
    local v = tonumber(string.sub(key, 8 * i - 7, 8 * i), 16)
    if string.byte(orders, i) == 100 then
      v = WIDE_MAX - v
    end
    values[i] = v
  end
  return values, tonumber(string.sub(key, 8 * n + 1), 16)
end

-- Is key a better than key b? Compared number by number, never with Lua's string '<' (which
-- follows the server's collation locale, not bytes).
local function wide_better(a, b, nvalues)
  for i = 1, nvalues + 1 do
    local first, last = 8 * i - 7, 8 * i
    if i > nvalues then
      last = #a
    end
    local x, y = tonumber(string.sub(a, first, last), 16), tonumber(string.sub(b, first, last), 16)
    if x ~= y then
      return x < y
    end
  end
  return false
end

-- The key a player must hold after one more result, per rule (as merged_score): nil when
-- nothing changes, false plus a reason when a cumulative sum passes WIDE_MAX.
local function wide_merged(old, values, ticks, rule, orders, tick_digits)
  if rule == 'best' then
    local new = wide_encode(values, ticks, orders, tick_digits)
    if old == nil or wide_better(new, old, #orders) then
      return new
    end
    return nil
  end
  if rule == 'latest' or old == nil then
    return wide_encode(values, ticks, orders, tick_digits)
  end
  local old_values, old_ticks = wide_decode(old, orders)
  local sums = {}
  for i = 1, #values do
    sums[i] = old_values[i] + values[i]
    if sums[i] > WIDE_MAX then
      return false, 'cumulative value ' .. score_str(sums[i]) .. ' exceeds ' .. WIDE_MAX
    end
  end
  if old_ticks > ticks then
    ticks = old_ticks
  end
  return wide_encode(sums, ticks, orders, tick_digits)
end

-- Take member off the wide board (zset, index).
local function wide_remove(zset, index, member)
  local old = redis.call('HGET', index, member)
  if old then
    redis.call('ZREM', zset, old .. member)
    redis.call('HDEL', index, member)
  end
end

-- Merge one (values, ticks) into member of a wide board; index may be a bare hash (a rebuild's
-- delta, zset = false). Returns 1 if it changed, 0 if not, or an error string.
local function wide_merge_into(zset, index, member, values, ticks, rule, orders, tick_digits)
  local old = redis.call('HGET', index, member) or nil
  local new, err = wide_merged(old, values, ticks, rule, orders, tick_digits)
  if new == false then
    return err
  end
  if new == nil then
    return 0
  end
  if zset then
    if old then
      redis.call('ZREM', zset, old .. member)
    end
    redis.call('ZADD', zset, 0, new .. member)
  end
  redis.call('HSET', index, member, new)
  return 1
end

-- ---- rank events (docs/events.md) ----
-- The apply scripts compute a board's rank events where the ranks are known and write them,
-- in the same call, to the board's outbox stream (leaderboard/keys.py rank_events_outbox).
-- An event is one line "<player id> <JSON>": the key and the value of its Kafka message.

-- Unix seconds -> RFC 3339 UTC, "YYYY-MM-DDTHH:MM:SSZ" (days to a civil date: H. Hinnant's
-- days_from_civil inverse; Redis's Lua has no os.date). Memoized per call: the results of one
-- batch share few seconds, and formatting was a large part of an event's cost.
local utc_texts = {}
local function utc_text(seconds)
  local text = utc_texts[seconds]
  if text then
    return text
  end
  local days = math.floor(seconds / 86400)
  local rest = seconds - days * 86400
  local z = days + 719468
  local era = math.floor(z / 146097)
  local doe = z - era * 146097
  local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524)
    - math.floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
  local mp = math.floor((5 * doy + 2) / 153)
  local day = doy - math.floor((153 * mp + 2) / 5) + 1
  local month = mp < 10 and mp + 3 or mp - 9
  local year = yoe + era * 400 + (month <= 2 and 1 or 0)
  text = string.format('%04d-%02d-%02dT%02d:%02d:%02dZ', year, month, day,
    math.floor(rest / 3600), math.floor(rest % 3600 / 60), rest % 60)
  utc_texts[seconds] = text
  return text
end

-- The events of one apply call. id_prefix is "<topic tag>:<board id>:<partition>:" (the tag:
-- 8 hex digits of the topic name's SHA-1): an event's id is "<id_prefix><offset>:<type>:<player
-- id>", the same on every redelivery and replay of the result (leaderboard/rank_events.py
-- rank_event_id). Ids are built, not hashed: hashing each was a third of an event's cost here.
local function rank_events_new(id_prefix, season_id, slug)
  return {
    id_prefix = id_prefix,
    head = '","seasonId":' .. season_id .. ',"board":"' .. slug .. '","playerId":',
    lines = {},
  }
end

-- One event. cause = {offset, match id ("-" = unknown), at (unix seconds)} of the result.
local function rank_event(events, kind, player, rank, previous_rank, points, previous_points,
                          other, cause)
  local match_id = 'null'
  if cause[2] ~= '-' then
    match_id = '"' .. cause[2] .. '"'
  end
  -- Numbers are concatenated as they are (%.14g: exact for integers up to 10^14, past any
  -- rank or points); a missing one (nil) is null.
  local lines = events.lines
  lines[#lines + 1] = player .. ' {"eventId":"' .. events.id_prefix .. cause[1] .. ':' .. kind
    .. ':' .. player .. '","type":"' .. kind .. events.head .. player .. ',"rank":'
    .. (rank or 'null') .. ',"previousRank":' .. (previous_rank or 'null') .. ',"points":'
    .. (points or 'null') .. ',"previousPoints":' .. (previous_points or 'null')
    .. ',"matchId":' .. match_id .. ',"otherPlayerId":' .. (other or 'null') .. ',"at":"'
    .. utc_text(cause[3]) .. '"}'
end

-- The rank events of one player's value moving on a board, whatever the board's encoding.
-- step: {player, old value or false, new value, cause}; the board's rank functions (b):
--   b.rank(value)          1-based rank of a value (1 + how many are strictly better)
--   b.points(value)        the points a value holds
--   b.better(a, b)         is value a strictly better than value b
--   b.write(player, old, new)
--   b.below(player, new)   the value and player right below player (nil, nil: none)
--   b.at(position)         the value and player at 0-based position (nil, nil: none)
--   b.tied(value, limit)   up to limit players holding exactly value
-- personal: emit personal_best (the rule decides: best improved, latest changed, cumulative
-- counted). top_n: the top of entered_top and left_top.
local TIED_LIMIT = 16
local function rank_step_events(events, b, step, personal, top_n)
  local player, old, new, cause = step[1], step[2], step[3], step[4]
  local old_rank = old and b.rank(old) or nil
  b.write(player, old, new)
  local new_rank = b.rank(new)
  local points = b.points(new)
  local old_points = old and b.points(old) or nil
  if personal then
    rank_event(events, 'personal_best', player, new_rank, old_rank, points, old_points, nil, cause)
  end
  if old_rank ~= new_rank then
    rank_event(events, 'rank_changed', player, new_rank, old_rank, points, old_points, nil, cause)
  end
  local improved = not old or b.better(new, old)
  if improved then
    -- Directly passed: the player right below now, if they were not below before. A first
    -- entry passes nobody (the players below lose a rank to a newcomer who was never behind).
    local value, passed = nil, nil
    if old then
      value, passed = b.below(player, new)
    end
    if passed and not b.better(old, value) then
      local their_rank = b.rank(value)
      local their_points = b.points(value)
      rank_event(events, 'overtaken', passed, their_rank, their_rank - 1, their_points,
        their_points, player, cause)
    end
    if new_rank <= top_n and (not old_rank or old_rank > top_n) then
      rank_event(events, 'entered_top', player, new_rank, old_rank, points, old_points, nil,
        cause)
      -- Pushed out: whoever holds rank top_n + 1 now held top_n before (the player was not
      -- above them then).
      local edge = b.at(top_n)
      if edge and b.rank(edge) == top_n + 1 and (not old or not b.better(old, edge)) then
        for _, out in ipairs(b.tied(edge, TIED_LIMIT)) do
          local out_points = b.points(edge)
          rank_event(events, 'left_top', out, top_n + 1, top_n, out_points, out_points, player,
            cause)
        end
      end
    end
  elseif old_rank <= top_n and new_rank > top_n then
    -- A worse value (latest rule, or a later tick under cumulative): the player left the top
    -- on their own, and whoever holds rank top_n now came up from below it.
    rank_event(events, 'left_top', player, new_rank, old_rank, points, old_points, nil, cause)
    local edge, edge_player = b.at(top_n - 1)
    if edge and edge_player ~= player and b.rank(edge) == top_n and b.better(old, edge) then
      for _, up in ipairs(b.tied(edge, TIED_LIMIT)) do
        local up_points = b.points(edge)
        rank_event(events, 'entered_top', up, top_n, top_n + 1, up_points, up_points, nil,
          cause)
      end
    end
  end
end
