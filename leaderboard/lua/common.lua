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
