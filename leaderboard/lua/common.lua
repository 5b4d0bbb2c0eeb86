-- Shared by every board script: leaderboard/scripts.py prepends this file to each script
-- before loading it, so the helpers below exist in every script's scope.
--
-- Numbers in Redis Lua are doubles: every integer up to 2^53 is exact, which is exactly the
-- codec's range. Never tostring() a score: Lua formats doubles with %.14g and would drop
-- digits. score_str() formats them with %.0f, exact for integers below 2^53.

local function score_str(score)
  return string.format('%.0f', score)
end

-- Split an encoded score into (points, low) where low = max_ticks - ticks.
local function split_score(score, time_bits)
  local scale = 2 ^ time_bits
  local points = math.floor(score / scale)
  return points, score - points * scale
end

-- The score a board must hold after one more result, per rule.
-- best: the higher composite wins (equal points: the earlier, i.e. larger low part).
-- cumulative: points add up, time part = the latest result (the smaller low part).
-- Returns nil when nothing changes, or false plus a reason when the sum overflows the codec.
local function merged_score(old, points, ticks, rule, time_bits, max_points)
  local scale = 2 ^ time_bits
  local low = (scale - 1) - ticks
  if rule == 'best' then
    local new = points * scale + low
    if old == nil or new > old then
      return new
    end
    return nil
  end
  if old == nil then
    return points * scale + low
  end
  local old_points, old_low = split_score(old, time_bits)
  local sum = old_points + points
  if sum > max_points then
    return false, 'cumulative points ' .. score_str(sum) .. ' exceed the codec maximum ' .. score_str(max_points)
  end
  if old_low < low then
    low = old_low
  end
  return sum * scale + low
end

-- Merge one (points, ticks) into member of key per rule. Returns 1 if the board changed,
-- 0 if not, or an error string.
local function merge_into(key, member, points, ticks, rule, time_bits, max_points)
  local current = redis.call('ZSCORE', key, member)
  local old = nil
  if current then
    old = tonumber(current)
  end
  local new, err = merged_score(old, points, ticks, rule, time_bits, max_points)
  if new == false then
    return err
  end
  if new == nil then
    return 0
  end
  redis.call('ZADD', key, score_str(new), member)
  return 1
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
