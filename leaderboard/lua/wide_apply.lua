-- apply_results.lua for a board with tie-break columns: one Kafka partition's batch of
-- counted results on ONE wide board (common.lua, "wide keys"), exactly once.
--
-- KEYS[1]            hash: partition -> highest offset of this topic already on this board
-- KEYS[2 + 6(i-1)..] key group i: the sorted set, its index hash, its rebuild marker, pending
--                    list, delta hash and done key
-- ARGV[1]            the partition (hash field)
-- ARGV[2]            the lowest offset among the results below
-- ARGV[3]            the highest offset the caller has handled in this partition
-- ARGV[4..6]         the board's wide spec: rule, orders, tick_digits
-- ARGV[7]            number of key groups n
-- ARGV[8..7+n]       per key group: expire_at (unix seconds, 0 = none)
-- ARGV[8+n]          number of results m
-- ARGV[9+n..14+n]    the results, one argument per column, each m items separated by spaces:
--                    member (player id), values (points and each column, joined by ','),
--                    ticks, xid, the key group it counts on season-long and daily (0: none).
--
-- Replies as apply_results.lua: {0, applied_offset} when the watermark covers some of these
-- offsets, else {1, changed, "group_index member" of each cumulative sum past the maximum}.
-- The watermark, the writes and the rebuild protocol's bookkeeping happen in this one call.

local field = ARGV[1]
local min_offset = tonumber(ARGV[2])
local handled_offset = tonumber(ARGV[3])
local applied = redis.call('HGET', KEYS[1], field)
if applied and tonumber(applied) >= min_offset then
  return {0, applied}
end

local rule, orders, tick_digits = ARGV[4], ARGV[5], tonumber(ARGV[6])
local nvalues = #orders
local ngroups = tonumber(ARGV[7])
local spec_error = check_wide_spec(rule, orders, tick_digits)
if spec_error or not ngroups or #ARGV ~= 14 + ngroups or #KEYS ~= 1 + 6 * ngroups
    or not tonumber(ARGV[8 + ngroups]) then
  return redis.error_reply('wide_apply: expected 14 + n arguments and 1 + 6n keys for n = '
    .. tostring(ARGV[7]) .. ', got ' .. #ARGV .. ' and ' .. #KEYS
    .. (spec_error and (' (' .. spec_error .. ')') or '')
    .. ' (caller and script of different versions?)')
end
local groups = {}
for i = 1, ngroups do
  local k = 1 + (i - 1) * 6
  groups[i] = {
    key = KEYS[k + 1], index = KEYS[k + 2], marker = KEYS[k + 3], pending = KEYS[k + 4],
    delta = KEYS[k + 5], done = redis.call('GET', KEYS[k + 6]) or false,
    expire_at = tonumber(ARGV[7 + i]), touched = false,
  }
end

local count = tonumber(ARGV[8 + ngroups])
local column = {}
for c = 1, 6 do
  column[c] = string.gmatch(ARGV[8 + ngroups + c], '%S+')
end
local members, values_of, ticks_of, xids, season_long, daily =
  column[1], column[2], column[3], column[4], column[5], column[6]

local function parse_values(text)
  local values = {}
  for v in string.gmatch(text, '[^,]+') do
    local n = tonumber(v)
    if not n or n < 0 or n > WIDE_MAX or n ~= math.floor(n) then
      return nil
    end
    values[#values + 1] = n
  end
  if #values ~= nvalues then
    return nil
  end
  return values
end

-- Entries {group, member, values, ticks, xid}, collapsed per (group, member, xid) under the
-- cumulative rule (sums of every value, the latest tick).
local entries = {}
local collapsed = {}
local function add(i, member, values, ticks, xid)
  if rule == 'cumulative' then
    local slot = i .. ' ' .. member .. ' ' .. xid
    local e = collapsed[slot]
    if e then
      for v = 1, nvalues do
        e[3][v] = e[3][v] + values[v]
      end
      if ticks > e[4] then
        e[4] = ticks
      end
      return
    end
    local copy = {}
    for v = 1, nvalues do
      copy[v] = values[v]
    end
    e = {i, member, copy, ticks, xid}
    collapsed[slot] = e
    entries[#entries + 1] = e
  else
    entries[#entries + 1] = {i, member, values, ticks, xid}
  end
end
for _ = 1, count do
  local member, svalues, sticks, sxid = members(), values_of(), ticks_of(), xids()
  local sl, dl = tonumber(season_long() or ''), tonumber(daily() or '')
  local values = svalues and parse_values(svalues)
  if not (member and values and tonumber(sticks) and tonumber(sxid) and sl and dl)
      or sl > ngroups or dl > ngroups then
    return redis.error_reply('wide_apply: ' .. count .. ' results sent, a column is short, '
      .. 'holds a value outside 0..' .. WIDE_MAX .. ' or not ' .. nvalues .. ' values, '
      .. 'or names a key group outside 1..' .. ngroups)
  end
  local ticks, xid = tonumber(sticks), tonumber(sxid)
  if sl > 0 then
    add(sl, member, values, ticks, xid)
  end
  if dl > 0 then
    add(dl, member, values, ticks, xid)
  end
end
for c = 1, 6 do
  if column[c]() then
    return redis.error_reply('wide_apply: ' .. count .. ' results sent, column ' .. c
      .. ' has more')
  end
end

-- Pass 1: every new key, with no write (an overflow cannot leave half a batch applied).
local current = {}  -- "i member" -> key (false: not on the board)
local stored = {}   -- "i member" -> the key Redis holds now (false: none)
local dirty = {}
local order_of = {}
local counted = {}
local overflow = {}
for _, e in ipairs(entries) do
  local i, member = e[1], e[2]
  local group = groups[i]
  if group.done and xid_visible(e[5], group.done) then
    -- already on this key: the rebuild that replaced it counted it
  else
    local slot = i .. ' ' .. member
    local old = current[slot]
    if old == nil then
      old = redis.call('HGET', group.index, member) or false
      stored[slot] = old
    end
    local new = wide_merged(old or nil, e[3], e[4], rule, orders, tick_digits)
    if new == false then
      overflow[#overflow + 1] = slot
    else
      if new ~= nil then
        current[slot] = new
        if not dirty[slot] then
          dirty[slot] = true
          order_of[#order_of + 1] = {i, member, slot}
        end
      else
        current[slot] = old
      end
      counted[#counted + 1] = e
    end
  end
end

-- Pass 2: write. Per key group, the old members off, the new ones on, the index updated,
-- batched (a call from Lua into Redis costs about as much as the insert itself).
local BATCH = 500
local per_group = {}
for _, item in ipairs(order_of) do
  local i, member, slot = item[1], item[2], item[3]
  local w = per_group[i]
  if not w then
    w = {rem = {}, add = {}, hset = {}}
    per_group[i] = w
  end
  if stored[slot] then
    w.rem[#w.rem + 1] = stored[slot] .. member
  end
  w.add[#w.add + 1] = 0
  w.add[#w.add + 1] = current[slot] .. member
  w.hset[#w.hset + 1] = member
  w.hset[#w.hset + 1] = current[slot]
end
local changed = 0
for i, w in pairs(per_group) do
  local group = groups[i]
  for first = 1, #w.rem, BATCH do
    redis.call('ZREM', group.key, unpack(w.rem, first, math.min(first + BATCH - 1, #w.rem)))
  end
  for first = 1, #w.add, 2 * BATCH do
    local last = math.min(first + 2 * BATCH - 1, #w.add)
    redis.call('ZADD', group.key, unpack(w.add, first, last))
    redis.call('HSET', group.index, unpack(w.hset, first, last))
  end
  changed = changed + #w.add / 2
  if group.expire_at > 0 then
    redis.call('EXPIREAT', group.key, group.expire_at)
    redis.call('EXPIREAT', group.index, group.expire_at)
  end
end

-- The rebuild protocol (docs/ingestion.md), as apply_results.lua: while a board is being
-- rebuilt, remember every counted result its snapshot may not contain.
local markers = {}
for _, e in ipairs(counted) do
  local group = groups[e[1]]
  local marker = markers[e[1]]
  if marker == nil then
    marker = redis.call('GET', group.marker) or false
    markers[e[1]] = marker
  end
  if marker == 'pending' then
    redis.call('RPUSH', group.pending, score_str(e[5]) .. ' ' .. e[2] .. ' '
      .. score_str(e[4]) .. ' ' .. table.concat(e[3], ','))
  elseif marker and not xid_visible(e[5], marker) then
    local res = wide_merge_into(false, group.delta, e[2], e[3], e[4], rule, orders, tick_digits)
    if type(res) == 'string' then
      overflow[#overflow + 1] = e[1] .. ' ' .. e[2]
    end
  end
end

if not applied or tonumber(applied) < handled_offset then
  redis.call('HSET', KEYS[1], field, score_str(handled_offset))
end

local reply = {1, changed}
for _, slot in ipairs(overflow) do
  reply[#reply + 1] = slot
end
return reply
