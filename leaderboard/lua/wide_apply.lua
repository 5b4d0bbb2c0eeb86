-- apply_results.lua for a board with tie-break columns: one Kafka partition's batch of
-- counted results on ONE wide board (common.lua, "wide keys"), exactly once, with the board's
-- rank events.
--
-- KEYS[1]            hash: partition -> highest offset of this topic already on this board
-- KEYS[2]            stream: the board's rank events outbox for this topic and partition
-- KEYS[3]            the board's intact key (absent: Redis lost the board; no events)
-- KEYS[4 + 6(i-1)..] key group i: the sorted set, its index hash, its rebuild marker, pending
--                    list, delta hash and done key
-- ARGV[1]            the partition (hash field)
-- ARGV[2]            the lowest offset among the results below
-- ARGV[3]            the highest offset the caller has handled in this partition
-- ARGV[4..6]         the board's wide spec: rule, orders, tick_digits
-- ARGV[7]            number of key groups n
-- ARGV[8..7+n]       per key group: expire_at (unix seconds, 0 = none)
-- ARGV[8+n]          number of results m
-- ARGV[9+n..13+n]    the results, one argument per column, each m items separated by spaces:
--                    member (player id), its wide key (the caller encodes it: WideKeyCodec),
--                    xid, the key group it counts on season-long and daily (0: none).
--                    Keys rather than values: formatting them here was most of the script's
--                    cost, and the caller validated every value already.
-- ARGV[14+n]         rank events: the board's event top N (0: the board emits no events)
-- ARGV[15+n..18+n]   the topic's tag, board id, season id and board slug (for the events)
-- ARGV[19+n..21+n]   with events, three more columns (else empty): each result's offset, match
--                    id ("-": unknown) and achievedAt (unix seconds), separated by single
--                    spaces (common.lua causes_open: read only for the results that emit)
--
-- With events the season-long key is written result by result, as in apply_results.lua; the
-- events' points are the key's points (its first value).
--
-- Replies as apply_results.lua: {0, applied_offset} when the watermark covers some of these
-- offsets, else {1, changed, outbox_id, events, "group_index member" of each cumulative sum
-- past the maximum}. The watermark, the writes, the outbox and the rebuild protocol's
-- bookkeeping happen in this one call.

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
if spec_error or not ngroups or #ARGV ~= 21 + ngroups or #KEYS ~= 3 + 6 * ngroups
    or not tonumber(ARGV[8 + ngroups]) or not tonumber(ARGV[14 + ngroups]) then
  return redis.error_reply('wide_apply: expected 21 + n arguments and 3 + 6n keys for n = '
    .. tostring(ARGV[7]) .. ', got ' .. #ARGV .. ' and ' .. #KEYS
    .. (spec_error and (' (' .. spec_error .. ')') or '')
    .. ' (caller and script of different versions?)')
end
local top_n = tonumber(ARGV[14 + ngroups])
-- No events from a board Redis lost (no intact key): its ranks are wrong until it is rebuilt.
local events = nil
if top_n > 0 and redis.call('EXISTS', KEYS[3]) == 1 then
  events = rank_events_new(
    ARGV[15 + ngroups] .. ':' .. ARGV[16 + ngroups] .. ':' .. field .. ':',
    ARGV[17 + ngroups], ARGV[18 + ngroups])
end
local groups = {}
for i = 1, ngroups do
  local k = 3 + (i - 1) * 6
  groups[i] = {
    key = KEYS[k + 1], index = KEYS[k + 2], marker = KEYS[k + 3], pending = KEYS[k + 4],
    delta = KEYS[k + 5], done = redis.call('GET', KEYS[k + 6]) or false,
    expire_at = tonumber(ARGV[7 + i]), touched = false,
  }
end

local count = tonumber(ARGV[8 + ngroups])
local column = {}
for c = 1, 5 do
  column[c] = string.gmatch(ARGV[8 + ngroups + c], '%S+')
end
local members, keys_of, xids, season_long, daily =
  column[1], column[2], column[3], column[4], column[5]
local key_length = 8 * nvalues + tick_digits

-- Entries {group, member, key, xid}. Under the cumulative rule, collapsed per (group, member,
-- xid): the sums of every value and the latest tick, as a key again.
local entries = {}
local collapsed = {}
-- With events, the season-long entries in result order: {group, member, key, xid, false,
-- cause}, each applied on its own (pass 2).
local steps_in = {}
local function add(i, member, key, xid, cause)
  if cause then
    steps_in[#steps_in + 1] = {i, member, key, xid, false, cause}
    return
  end
  if rule == 'cumulative' then
    local slot = i .. ' ' .. member .. ' ' .. xid
    local e = collapsed[slot]
    if e then
      local sums, ticks = wide_decode(e[3], orders)
      local values, more_ticks = wide_decode(key, orders)
      for v = 1, nvalues do
        sums[v] = sums[v] + values[v]
        if sums[v] > WIDE_MAX then
          e[5] = true  -- the batch's sum passes the maximum: left out whole
          sums[v] = WIDE_MAX
        end
      end
      if more_ticks > ticks then
        ticks = more_ticks
      end
      e[3] = wide_encode(sums, ticks, orders, tick_digits)
      return
    end
    e = {i, member, key, xid, false}
    collapsed[slot] = e
    entries[#entries + 1] = e
  else
    entries[#entries + 1] = {i, member, key, xid, false}
  end
end
local causes = nil
if events then
  causes = causes_open(ARGV[19 + ngroups], ARGV[20 + ngroups], ARGV[21 + ngroups], count)
  if not causes then
    return redis.error_reply('wide_apply: ' .. count .. ' results sent, an events column '
      .. '(offsets, match ids, times) does not hold as many values of its kind, separated by '
      .. 'single spaces')
  end
end
for k = 1, count do
  local member, key, sxid = members(), keys_of(), xids()
  local sl, dl = tonumber(season_long() or ''), tonumber(daily() or '')
  local xid = tonumber(sxid or '')
  if not (member and key and xid and sl and dl) or #key ~= key_length
      or sl > ngroups or dl > ngroups then
    return redis.error_reply('wide_apply: ' .. count .. ' results sent, a column is short, '
      .. 'holds a key that is not ' .. key_length .. ' characters long, '
      .. 'or names a key group outside 1..' .. ngroups)
  end
  -- With events, a season-long result's cause is its index: causes_at reads it if it emits.
  local cause = causes and k or nil
  if sl > 0 then
    add(sl, member, key, xid, cause)
  end
  if dl > 0 then
    add(dl, member, key, xid)
  end
end
for c = 1, 5 do
  if column[c]() then
    return redis.error_reply('wide_apply: ' .. count .. ' results sent, column ' .. c
      .. ' has more')
  end
end

-- Every player's key on each group now: one HMGET per group and up to BATCH players (a call
-- from Lua into Redis costs about as much as the command itself). Per group, by member: no
-- string is built per result to look one up.
local BATCH = 500
local stored = {}   -- group -> member -> the key Redis holds now (false: none)
local current = {}  -- group -> member -> the key it must hold (false: none)
for i = 1, ngroups do
  stored[i], current[i] = {}, {}
end
do
  local wanted = {}
  for _, e in ipairs(entries) do
    local mine = stored[e[1]]
    if mine[e[2]] == nil then
      mine[e[2]] = false
      local list = wanted[e[1]]
      if not list then
        list = {}
        wanted[e[1]] = list
      end
      list[#list + 1] = e[2]
    end
  end
  for i, list in pairs(wanted) do
    local mine = stored[i]
    for first = 1, #list, BATCH do
      local last = math.min(first + BATCH - 1, #list)
      local found = redis.call('HMGET', groups[i].index, unpack(list, first, last))
      for n = first, last do
        mine[list[n]] = found[n - first + 1]
      end
    end
  end
end

-- Pass 1: every new key, with no write (an overflow cannot leave half a batch applied).
local dirty = {}     -- {group, member} in first-changed order
local marked = {}    -- group -> member -> true once in dirty
for i = 1, ngroups do
  marked[i] = {}
end
local counted = {}
local overflow = {}
for _, e in ipairs(entries) do
  local i, member, key = e[1], e[2], e[3]
  local group = groups[i]
  if group.done and xid_visible(e[4], group.done) then
    -- already on this key: the rebuild that replaced it counted it
  else
    local now = current[i]
    local old = now[member]
    local fresh = old == nil
    if fresh then
      old = stored[i][member]
    end
    local new
    if e[5] then
      new = false
    elseif rule == 'best' then
      if not old or wide_better(key, old, nvalues) then
        new = key
      end
    elseif not old then
      new = key
    else
      -- latest: the key, unless the one held is of a later tick (wide_merged).
      local values, ticks = wide_decode(key, orders)
      new = wide_merged(old, values, ticks, rule, orders, tick_digits)
    end
    if new == false then
      overflow[#overflow + 1] = i .. ' ' .. member
    else
      if new ~= nil then
        if not marked[i][member] then
          marked[i][member] = true
          dirty[#dirty + 1] = {i, member}
        end
        now[member] = new
      elseif fresh then
        now[member] = old
      end
      counted[#counted + 1] = e
    end
  end
end

-- Pass 1 of the season-long steps (with events): each result's new key in order, with no
-- write; a step that changes nothing emits nothing (cumulative: every counted result does).
local steps = {}
do
  -- member -> key before the batch (false: not on the board)
  local now = #steps_in > 0
    and values_before(steps_in, 'HMGET', groups[steps_in[1][1]].index, BATCH)
    or {}
  for _, e in ipairs(steps_in) do
    local i, member, key = e[1], e[2], e[3]
    local group = groups[i]
    if not (group.done and xid_visible(e[4], group.done)) then
      local old = now[member]
      local new
      if rule == 'best' then
        if not old or wide_better(key, old, nvalues) then
          new = key
        end
      elseif not old then
        new = key
      else
        local values, ticks = wide_decode(key, orders)
        new = wide_merged(old, values, ticks, rule, orders, tick_digits)
      end
      if new == false then
        overflow[#overflow + 1] = i .. ' ' .. member
      else
        counted[#counted + 1] = e
        if new ~= nil and new ~= old then
          steps[#steps + 1] = {member, old, new, causes_at(causes, e[6])}
          now[member] = new
        elseif rule == 'cumulative' then
          steps[#steps + 1] = {member, old, old, causes_at(causes, e[6])}
        end
      end
    end
  end
end

-- Pass 2: write. Per key group, the old members off, the new ones on, the index updated,
-- batched.
local per_group = {}
for _, item in ipairs(dirty) do
  local i, member = item[1], item[2]
  local new = current[i][member]
  local old = stored[i][member]
  if new ~= old then
    local w = per_group[i]
    if not w then
      w = {rem = {}, add = {}, hset = {}}
      per_group[i] = w
    end
    if old then
      w.rem[#w.rem + 1] = old .. member
    end
    w.add[#w.add + 1] = 0
    w.add[#w.add + 1] = new .. member
    w.hset[#w.hset + 1] = member
    w.hset[#w.hset + 1] = new
  end
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

-- Pass 2 of the season-long steps: each written on its own, its events computed around it.
if #steps > 0 then
  local group = groups[steps_in[1][1]]
  local zset, index = group.key, group.index
  local function rank(key)
    return redis.call('ZLEXCOUNT', zset, '-', '(' .. key) + 1
  end
  local function split(member)
    if not member then
      return nil, nil
    end
    return string.sub(member, 1, key_length), string.sub(member, key_length + 1)
  end
  local board = {
    rank = rank,
    points = function(key)
      return (wide_decode(key, orders))[1]
    end,
    better = function(a, b) return wide_better(a, b, nvalues) end,
    write = function(member, old, new)
      if new ~= old then
        if old then
          redis.call('ZREM', zset, old .. member)
        end
        redis.call('ZADD', zset, 0, new .. member)
        redis.call('HSET', index, member, new)
      end
    end,
    -- The first member with a strictly worse key (':' sorts after every digit of a player
    -- id): the next member by position may hold the same key, a tie, whom nobody passed.
    below = function(member, key)
      return split(redis.call('ZRANGEBYLEX', zset, '(' .. key .. ':', '+', 'LIMIT', 0, 1)[1])
    end,
    at = function(position)
      return split(redis.call('ZRANGE', zset, position, position)[1])
    end,
    tied = function(key, limit)
      local found = redis.call('ZRANGEBYLEX', zset, '[' .. key, '(' .. key .. ':', 'LIMIT', 0,
        limit)
      for n, member in ipairs(found) do
        found[n] = string.sub(member, key_length + 1)
      end
      return found
    end,
  }
  for _, step in ipairs(steps) do
    if step[2] ~= step[3] then
      changed = changed + 1
    end
    rank_step_events(events, board, step, top_n)
  end
end

-- The rebuild protocol (docs/ingestion.md), as apply_results.lua: while a board is being
-- rebuilt, remember every counted result its snapshot may not contain.
local markers, rebuilding = rebuild_markers(groups, ngroups)
for _, e in ipairs(rebuilding and counted or {}) do
  local group = groups[e[1]]
  local marker = markers[e[1]]
  if marker == 'pending' then
    redis.call('RPUSH', group.pending, score_str(e[4]) .. ' ' .. e[2] .. ' ' .. e[3])
  elseif marker and not xid_visible(e[4], marker) then
    local values, ticks = wide_decode(e[3], orders)
    local res = wide_merge_into(false, group.delta, e[2], values, ticks, rule, orders, tick_digits)
    if type(res) == 'string' then
      overflow[#overflow + 1] = e[1] .. ' ' .. e[2]
    end
  end
end

return apply_finish(field, applied, handled_offset, events, changed, overflow)
