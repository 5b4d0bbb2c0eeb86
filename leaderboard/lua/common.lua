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
