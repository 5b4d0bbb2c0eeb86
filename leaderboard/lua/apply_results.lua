-- Apply one Kafka partition's batch of counted results to ONE board, exactly once, with the
-- board's rank events.
--
-- Every key belongs to the board's hash slot ({b<board>}): its watermark, its events outbox,
-- its intact key, its season-long board and the daily boards the batch touches, each with its
-- rebuild keys.
--
-- KEYS[1]            hash: partition -> highest offset of this topic already on this board
-- KEYS[2]            stream: the board's rank events outbox for this topic and partition
-- KEYS[3]            the board's intact key (absent: Redis lost the board; no events)
-- KEYS[4 + 5(i-1)..] key group i: the sorted set, its rebuild marker, pending list, delta ZSET
--                    and done key (the snapshot of the rebuild that last replaced the set)
-- ARGV[1]            the partition (hash field)
-- ARGV[2]            the lowest offset among the results below
-- ARGV[3]            the highest offset the caller has handled in this partition
-- ARGV[4..7]         the board's spec: rule, order, time_bits, max_points
-- ARGV[8]            number of key groups n
-- ARGV[9..8+n]       per key group: expire_at (unix seconds, 0 = none)
-- ARGV[9+n]          number of results m
-- ARGV[10+n..15+n]   the results, one argument per column, each m numbers separated by spaces:
--                    member (player id), points, ticks, xid (the storing transaction), the key
--                    group it counts on season-long and the one it counts on daily (0: none).
--                    Columns rather than an argument per value, and no per-result work left to
--                    the caller: packing arguments was the client's largest cost.
-- ARGV[16+n]         rank events: the board's event top N (0: the board emits no events)
-- ARGV[17+n..20+n]   the topic's tag, board id, season id and board slug (for the events)
-- ARGV[21+n..23+n]   with events, three more columns (else empty): each result's offset, match
--                    id ("-": unknown) and achievedAt (unix seconds), separated by single
--                    spaces (common.lua causes_open: read only for the results that emit)
--
-- The script collapses the results per (key group, member, xid) under the board's rule before
-- writing: cumulative sums them (so a sum that overflows is left out whole), best and latest
-- write each (ZADD GT keeps the better one; latest receives one result per key and player).
-- With events, the season-long key is written result by result instead, in offset order, each
-- step computing the player's rank before and after and the events it causes (common.lua
-- rank_step_events); daily keys emit nothing. A cumulative result whose sum overflows is then
-- left out on its own.
--
-- Returns {0, applied_offset} when some of these offsets are already on the board (a
-- redelivery, a retry after a lost reply, or another consumer of the partition got there
-- first: the caller drops them and calls again), or {1, changed, outbox_id, events,
-- overflow...}: outbox_id the stream entry holding this call's events ("" when none), events
-- its text (common.lua: compact, the consumer makes the JSON), overflow the "group_index member" of
-- cumulative sums the codec cannot hold (those results are left out; nothing is clamped). This
-- answer is the only exactly-once decision: the caller reads no watermark of its own.
--
-- A result the last finished rebuild of a key could see (its xid visible in the done key's
-- snapshot) is on that key already: it is left out of that key, not counted twice.
--
-- Everything, watermark and outbox included, happens in this one atomic call: either the whole
-- batch of the partition is on the board, its events in the outbox and the watermark covers
-- it, or none of it is.

local field = ARGV[1]
local min_offset = tonumber(ARGV[2])
local handled_offset = tonumber(ARGV[3])
local applied = redis.call('HGET', KEYS[1], field)
if applied and tonumber(applied) >= min_offset then
  return {0, applied}
end

local rule, order = ARGV[4], ARGV[5]
local time_bits, max_points = tonumber(ARGV[6]), tonumber(ARGV[7])
local ngroups = tonumber(ARGV[8])
-- A caller of another argument layout (e.g. a process started before a deploy, running its
-- old Python against this file) must fail loudly: parsed leniently, its results would match
-- nothing and the watermark would move past them, losing them without a word.
local spec_error = check_spec(rule, order, time_bits, max_points)
if spec_error or not ngroups or #ARGV ~= 23 + ngroups or #KEYS ~= 3 + 5 * ngroups
    or not tonumber(ARGV[9 + ngroups]) or not tonumber(ARGV[16 + ngroups]) then
  return redis.error_reply('apply_results: expected 23 + n arguments and 3 + 5n keys for n = '
    .. tostring(ARGV[8]) .. ', got ' .. #ARGV .. ' and ' .. #KEYS
    .. (spec_error and (' (' .. spec_error .. ')') or '')
    .. ' (caller and script of different versions?)')
end
local top_n = tonumber(ARGV[16 + ngroups])
-- A board Redis lost (no intact key) is empty or partial until the recovery rebuilt it: ranks
-- read from it would be wrong, so it emits nothing meanwhile (docs/events.md).
local events = nil
if top_n > 0 and redis.call('EXISTS', KEYS[3]) == 1 then
  events = rank_events_new(
    ARGV[17 + ngroups] .. ':' .. ARGV[18 + ngroups] .. ':' .. field .. ':',
    ARGV[19 + ngroups], ARGV[20 + ngroups])
end
local groups = {}
for i = 1, ngroups do
  local k = 3 + (i - 1) * 5
  groups[i] = {
    key = KEYS[k + 1], marker = KEYS[k + 2], pending = KEYS[k + 3], delta = KEYS[k + 4],
    done = redis.call('GET', KEYS[k + 5]) or false,
    expire_at = tonumber(ARGV[8 + i]), writes = {},
  }
end

-- The results, column by column, into entries {group, member, points, ticks, xid}: one per
-- key group a result counts on, collapsed per (group, member, xid) under the cumulative rule.
local count = tonumber(ARGV[9 + ngroups])
local column = {}
for c = 1, 6 do
  column[c] = string.gmatch(ARGV[9 + ngroups + c], '%d+')
end
local members, points_of, ticks_of, xids, season_long, daily =
  column[1], column[2], column[3], column[4], column[5], column[6]
local entries = {}
local collapsed = {}  -- cumulative: "group member xid" -> its entry
-- With events, the season-long entries in result order: {group, member, points, ticks, xid,
-- cause}, each applied on its own (pass 2).
local steps_in = {}
local function add(i, member, points, ticks, sxid, cause)
  if cause then
    steps_in[#steps_in + 1] = {i, member, points, ticks, tonumber(sxid), cause}
    return
  end
  if rule == 'cumulative' then
    local slot = i .. ' ' .. member .. ' ' .. sxid
    local e = collapsed[slot]
    if e then
      e[3] = e[3] + points
      if ticks > e[4] then
        e[4] = ticks
      end
      return
    end
    e = {i, member, points, ticks, tonumber(sxid)}
    collapsed[slot] = e
    entries[#entries + 1] = e
  else
    entries[#entries + 1] = {i, member, points, ticks, tonumber(sxid)}
  end
end
local causes = nil
if events then
  causes = causes_open(ARGV[21 + ngroups], ARGV[22 + ngroups], ARGV[23 + ngroups], count)
  if not causes then
    return redis.error_reply('apply_results: ' .. count .. ' results sent, an events column '
      .. '(offsets, match ids, times) does not hold as many values of its kind, separated by '
      .. 'single spaces')
  end
end
for k = 1, count do
  local member, spoints, sticks, sxid = members(), points_of(), ticks_of(), xids()
  local sl, dl = tonumber(season_long() or ''), tonumber(daily() or '')
  if not (member and spoints and sticks and sxid and sl and dl)
      or sl > ngroups or dl > ngroups then
    return redis.error_reply('apply_results: ' .. count .. ' results sent, a column is short '
      .. 'or names a key group outside 1..' .. ngroups)
  end
  -- With events, a season-long result's cause is its index: causes_at reads it if it emits.
  local cause = causes and k or nil
  local points, ticks = tonumber(spoints), tonumber(sticks)
  if sl > 0 then
    add(sl, member, points, ticks, sxid, cause)
  end
  if dl > 0 then
    add(dl, member, points, ticks, sxid)
  end
end
for c = 1, 6 do
  if column[c]() then
    return redis.error_reply('apply_results: ' .. count .. ' results sent, column ' .. c
      .. ' has more')
  end
end

-- Members per ZADD or ZMSCORE call (unpack stays well inside Lua's stack limit).
local ZADD_PAIRS = 500

-- Pass 1: compute every cumulative score, with no write, so an overflow cannot leave half a
-- batch applied. best and latest cannot overflow: their writes are collected as they come.
local current = {}   -- "i member" -> score (false = not on the board)
local dirty = {}
local order_of = {}
local counted = {}
local overflow = {}
-- latest: what each group holds for its members now, one ZMSCORE per group and ZADD_PAIRS
-- members, so that a result older than the value held (merged_score) leaves it.
local held = {}
if rule == 'latest' then
  local of_group = {}
  for _, e in ipairs(entries) do
    local list = of_group[e[1]]
    if not list then
      list = {}
      of_group[e[1]] = list
    end
    list[#list + 1] = e
  end
  for i, list in pairs(of_group) do
    held[i] = values_before(list, 'ZMSCORE', groups[i].key, ZADD_PAIRS, tonumber)
  end
end
for _, e in ipairs(entries) do
  local i, member, points, ticks = e[1], e[2], e[3], e[4]
  local group = groups[i]
  local ok = true
  if group.done and xid_visible(e[5], group.done) then
    ok = false  -- already on this key: the rebuild that replaced it counted it
  elseif rule == 'best' then
    local writes = group.writes
    writes[#writes + 1] = score_str(encode_score(points, ticks, order, time_bits, max_points))
    writes[#writes + 1] = member
  elseif rule == 'latest' then
    local new = merged_score(held[i][member] or nil, points, ticks, rule, order, time_bits,
      max_points)
    if new ~= nil then
      local writes = group.writes
      writes[#writes + 1] = score_str(new)
      writes[#writes + 1] = member
    end
  else
    local slot = i .. ' ' .. member
    local old = current[slot]
    if old == nil then
      local stored = redis.call('ZSCORE', group.key, member)
      old = stored and tonumber(stored) or false
    end
    local new = merged_score(old or nil, points, ticks, rule, order, time_bits, max_points)
    if new == false then
      overflow[#overflow + 1] = slot
      ok = false
    elseif new ~= nil then
      current[slot] = new
      if not dirty[slot] then
        dirty[slot] = true
        order_of[#order_of + 1] = {i, member}
      end
    else
      current[slot] = old
    end
  end
  if ok then
    counted[#counted + 1] = e
  end
end

-- Pass 1 of the season-long steps (with events): each result's new score in order, with no
-- write, as the rule merges it; a step that changes nothing emits nothing.
local steps = {}
do
  -- member -> score before the batch (false: not on the board)
  local now = #steps_in > 0
    and values_before(steps_in, 'ZMSCORE', groups[steps_in[1][1]].key, ZADD_PAIRS, tonumber)
    or {}
  for _, e in ipairs(steps_in) do
    local i, member, points, ticks = e[1], e[2], e[3], e[4]
    local group = groups[i]
    if not (group.done and xid_visible(e[5], group.done)) then
      local old = now[member]
      local new = merged_score(old or nil, points, ticks, rule, order, time_bits, max_points)
      if new == false then
        overflow[#overflow + 1] = i .. ' ' .. member
      else
        counted[#counted + 1] = e
        if new ~= nil and new ~= old then
          steps[#steps + 1] = {member, old, new, causes_at(causes, e[6])}
          now[member] = new
        elseif rule == 'cumulative' then
          -- A counted result that leaves the score as it was: still the player's news.
          steps[#steps + 1] = {member, old, old, causes_at(causes, e[6])}
        end
      end
    end
  end
end

-- Pass 2: write, one ZADD per key group and up to ZADD_PAIRS members (a call from Lua into
-- Redis costs about as much as the insert itself; unpack stays well inside Lua's stack limit).
-- best: ZADD GT (a pair repeated in one call keeps the higher score); latest: a plain ZADD (the
-- caller sends a player's latest result only, and one older than the value held was left out
-- above); cumulative: a plain ZADD of the sums above.
for _, pair in ipairs(order_of) do
  local writes = groups[pair[1]].writes
  writes[#writes + 1] = score_str(current[pair[1] .. ' ' .. pair[2]])
  writes[#writes + 1] = pair[2]
end
local changed = 0
for _, group in ipairs(groups) do
  local writes = group.writes
  for first = 1, #writes, 2 * ZADD_PAIRS do
    local last = math.min(first + 2 * ZADD_PAIRS - 1, #writes)
    if rule == 'best' then
      changed = changed + redis.call('ZADD', group.key, 'GT', 'CH', unpack(writes, first, last))
    else
      redis.call('ZADD', group.key, unpack(writes, first, last))
      changed = changed + (last - first + 1) / 2
    end
  end
  if #writes > 0 and group.expire_at > 0 then
    redis.call('EXPIREAT', group.key, group.expire_at)
  end
end

-- Pass 2 of the season-long steps: each written on its own, its events computed around it.
if #steps > 0 then
  local key = groups[steps_in[1][1]].key
  local function rank(score)
    return redis.call('ZCOUNT', key, '(' .. score_str(score), '+inf') + 1
  end
  local function points(score)
    return (decode_score(score, order, time_bits, max_points))
  end
  local function pair(reply)
    if reply[1] then
      return tonumber(reply[2]), reply[1]
    end
    return nil, nil
  end
  local board = {
    rank = rank,
    points = points,
    better = function(a, b) return a > b end,
    write = function(member, old, new)
      if new ~= old then
        redis.call('ZADD', key, score_str(new), member)
      end
    end,
    below = function(_, score)
      return pair(redis.call('ZREVRANGEBYSCORE', key, '(' .. score_str(score), '-inf',
        'WITHSCORES', 'LIMIT', 0, 1))
    end,
    at = function(position)
      return pair(redis.call('ZREVRANGE', key, position, position, 'WITHSCORES'))
    end,
    tied = function(score, limit)
      local s = score_str(score)
      return redis.call('ZRANGEBYSCORE', key, s, s, 'LIMIT', 0, limit)
    end,
    -- The two highest at or below the player's score: when the first is alone on it (the
    -- player: no tie), the second is right below, and its rank is the player's plus one.
    rank_below = function(_, score)
      local r = rank(score)
      local s = score_str(score)
      local got = redis.call('ZREVRANGEBYSCORE', key, s, '-inf', 'WITHSCORES', 'LIMIT', 0, 2)
      if got[4] and tonumber(got[2]) == score then
        local value = tonumber(got[4])
        if value < score then
          return r, value, got[3], r + 1
        end
      end
      return r
    end,
  }
  for _, step in ipairs(steps) do
    if step[2] ~= step[3] then
      changed = changed + 1
    end
    rank_step_events(events, board, step, top_n)
  end
end

-- The rebuild protocol (docs/ingestion.md): while a board is being rebuilt, remember every
-- result its snapshot may not contain, whether or not it changed the live board.
local markers, rebuilding = rebuild_markers(groups, ngroups)
for _, e in ipairs(rebuilding and counted or {}) do
  local group = groups[e[1]]
  local marker = markers[e[1]]
  if marker == 'pending' then
    redis.call('RPUSH', group.pending,
      score_str(e[5]) .. ' ' .. e[2] .. ' ' .. score_str(e[3]) .. ' ' .. score_str(e[4]))
  elseif marker and not xid_visible(e[5], marker) then
    local res = merge_into(group.delta, e[2], e[3], e[4], rule, order, time_bits, max_points)
    if type(res) == 'string' then
      overflow[#overflow + 1] = e[1] .. ' ' .. e[2]
    end
  end
end

return apply_finish(field, applied, handled_offset, events, changed, overflow)
