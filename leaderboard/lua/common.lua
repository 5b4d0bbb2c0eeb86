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
--   PostgreSQL decides it; later deliveries in the same script are later results), unless the
--   value is of a later tick: a later result of the player, on another partition, was stored
--   after this one was decided the latest and applied before it.
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
  if old == nil then
    return encode_score(points, ticks, order, time_bits, max_points)
  end
  local old_points, old_ticks = decode_score(old, order, time_bits, max_points)
  if rule == 'latest' then
    if old_ticks > ticks then
      return nil
    end
    return encode_score(points, ticks, order, time_bits, max_points)
  end
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

-- This Redis server process's run id (INFO server: a new one at every start).
local function redis_run_id()
  return string.match(redis.call('INFO', 'server'), 'run_id:(%x+)')
end

-- What a board's checked key holds once THIS Redis process compared the board with
-- PostgreSQL: its run id. Written with replication off, but an AOF rewrite, an RDB save or a
-- full resync of a replica copies memory, checked keys included: a restart or a failover can
-- come back with them, stamped with another process's run id.
local function checked_value()
  return 'run:' .. redis_run_id()
end

-- Do KEYS[first..] fail to vouch for the board? The read scripts' guard keys, in
-- leaderboard/selectors/_guards.py's order: the board's intact key (persisted: the board is
-- whole) and, on a master, its checked key, which vouches only with this process's run id
-- (or '1', what a checked key held before it carried one, until the recovery stamps it), so
-- a board a restart or a failover may have left stale answers 503 instead of a stale board.
local function keys_missing(first)
  if first <= #KEYS and redis.call('EXISTS', KEYS[first]) == 0 then
    return true
  end
  if first + 1 <= #KEYS then
    local checked = redis.call('GET', KEYS[first + 1])
    if checked ~= '1' and checked ~= checked_value() then
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
  if old == nil then
    return wide_encode(values, ticks, orders, tick_digits)
  end
  local old_values, old_ticks = wide_decode(old, orders)
  if rule == 'latest' then
    -- As merged_score: a value of a later tick stays (a later result applied first).
    if old_ticks > ticks then
      return nil
    end
    return wide_encode(values, ticks, orders, tick_digits)
  end
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
-- in the same call, to the board's outbox stream (leaderboard/keys.py rank_events_outbox) in
-- a compact form the consumer turns into the events' JSON (leaderboard/rank_events.py
-- outbox_messages): building each event's JSON here was a third of the script's cost.
--
-- An outbox entry is one string of tokens separated by single spaces: the header
--   E1 <season id> <board slug> <id prefix, "-" for none>
-- then records of ten tokens each:
--   <code> <cause> <match id, "-" for none> <at, unix seconds> <player> <rank>
--   <previous rank> <points> <previous points> <other player>
-- code: P personal_best, R rank_changed, O overtaken, T entered_top, L left_top, or S for a
-- result's own step: its personal_best, and its rank_changed when the two ranks differ. A
-- missing number is "null". An event's id is "<id prefix><cause>:<type>:<player id>".

local function rank_events_new(id_prefix, season_id, slug)
  return {out = {'E1', season_id, slug, id_prefix ~= '' and id_prefix or '-'}, count = 0}
end

-- The entry's text ('' when there are no events).
local function rank_events_payload(events)
  if not events or events.count == 0 then
    return ''
  end
  return table.concat(events.out, ' ')
end

-- A number as the outbox writes it: %d (C's integer formatting: Lua's own %.14g goes through
-- the floating-point printer, a measurable share of the script), nil as null.
local function event_number(n)
  if n == nil then
    return 'null'
  end
  return string.format('%d', n)
end

-- A player id as the outbox writes it: the member's own text. %d would go through a double
-- and a C long: an id past 2^53 (a Steam64 id) came out rounded to another player's, one past
-- 2^63 wrapped.
local function event_player(player)
  if player == nil then
    return 'null'
  end
  return player
end

local EVENT_CODES = {personal_best = 'P', rank_changed = 'R', overtaken = 'O', entered_top = 'T',
  left_top = 'L'}

-- One event of kind about player. cause = {cause id, match id ("-": none), at (unix seconds,
-- as text)} of what caused it.
local function rank_event(events, kind, player, rank, previous_rank, points, previous_points,
                          other, cause)
  local out = events.out
  out[#out + 1] = EVENT_CODES[kind] .. ' ' .. cause[1] .. ' ' .. cause[2] .. ' ' .. cause[3]
    .. ' ' .. player .. ' ' .. event_number(rank) .. ' ' .. event_number(previous_rank) .. ' '
    .. event_number(points) .. ' ' .. event_number(previous_points) .. ' '
    .. event_player(other)
  events.count = events.count + 1
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
--   b.rank_below(player, new)  optional, one call fewer: the rank of new (player's value now)
--                          and, when player alone holds it, the value, player and rank right
--                          below (else nil: below and rank are asked)
-- Every step emits personal_best (the rule decides what a step is: best improved, latest
-- changed, cumulative counted). top_n: the top of entered_top and left_top.
local TIED_LIMIT = 16
local function rank_step_events(events, b, step, top_n)
  local player, old, new, cause = step[1], step[2], step[3], step[4]
  local old_rank = old and b.rank(old) or nil
  b.write(player, old, new)
  local improved = not old or b.better(new, old)
  local new_rank, value, passed, their_rank
  if improved and old and b.rank_below then
    new_rank, value, passed, their_rank = b.rank_below(player, new)
  else
    new_rank = b.rank(new)
  end
  local points = b.points(new)
  local old_points = old and b.points(old) or nil
  local out = events.out
  if old then
    out[#out + 1] = string.format('S %s %s %s %s %d %d %d %d null', cause[1], cause[2],
      cause[3], player, new_rank, old_rank, points, old_points)
  else
    out[#out + 1] = string.format('S %s %s %s %s %d null %d null null', cause[1], cause[2],
      cause[3], player, new_rank, points)
  end
  events.count = events.count + (old_rank ~= new_rank and 2 or 1)
  if improved then
    -- Directly passed: the player right below now, if they were not below before. A first
    -- entry passes nobody (the players below lose a rank to a newcomer who was never behind).
    if old and not their_rank then
      value, passed = b.below(player, new)
    end
    if passed and not b.better(old, value) then
      their_rank = their_rank or b.rank(value)
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
        for _, out_player in ipairs(b.tied(edge, TIED_LIMIT)) do
          local out_points = b.points(edge)
          rank_event(events, 'left_top', out_player, top_n + 1, top_n, out_points, out_points,
            player, cause)
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

-- A batch's causes (the apply scripts' three events columns: each result's offset, match id
-- and achievedAt, single-space separated, count tokens each) -> a reader, or nil when a column
-- does not hold count tokens of its kind. A cause is cut out of the columns only for a result
-- that emits (causes_at): splitting every result's three tokens into Lua strings up front cost
-- more than the rest of a batch's events, since most results change nothing and emit nothing.
local function causes_open(offsets, match_ids, ats, count)
  local columns = {offsets, match_ids, ats}
  for c = 1, 3 do
    local column = columns[c]
    local _, tokens = string.gsub(column, '%S+', '')
    if tokens ~= count or string.find(column, '  ', 1, true) or string.byte(column, 1) == 32
        or string.byte(column, -1) == 32 or (c ~= 2 and string.find(column, '[^%d ]')) then
      return nil
    end
  end
  return {columns = columns, starts = {1, 1, 1}, index = 1}
end

-- The cause {offset, match id, at} of result k (from 1); k never decreases between calls.
local function causes_at(causes, k)
  local columns, starts = causes.columns, causes.starts
  while causes.index < k do
    for c = 1, 3 do
      starts[c] = string.find(columns[c], ' ', starts[c], true) + 1
    end
    causes.index = causes.index + 1
  end
  local cause = {}
  for c = 1, 3 do
    local last = string.find(columns[c], ' ', starts[c], true)
    cause[c] = string.sub(columns[c], starts[c], last and last - 1 or -1)
  end
  return cause
end

-- Each player of ``steps`` (the season-long steps with events: {group, member, ...}) -> the
-- value Redis holds for them before the batch (false: none), read with one ``command`` per
-- ``batch`` players (ZMSCORE on a board's set, HMGET on a wide board's index), not one call per
-- result: a call from Lua costs about as much as the look-up. ``convert`` (optional) turns a
-- reply into the value.
local function values_before(steps, command, key, batch, convert)
  local now = {}
  local members = {}
  for _, e in ipairs(steps) do
    if now[e[2]] == nil then
      now[e[2]] = false
      members[#members + 1] = e[2]
    end
  end
  for first = 1, #members, batch do
    local last = math.min(first + batch - 1, #members)
    local found = redis.call(command, key, unpack(members, first, last))
    for j = first, last do
      local value = found[j - first + 1]
      if value then
        now[members[j]] = convert and convert(value) or value
      end
    end
  end
  return now
end

-- The rebuild protocol's markers of an apply's key groups (docs/ingestion.md): one GET per
-- group; a board is rarely being rebuilt, and then no result needs looking at. Returns the
-- markers by group (false: none) and whether any group is being rebuilt.
local function rebuild_markers(groups, ngroups)
  local markers = {}
  local rebuilding = false
  for i = 1, ngroups do
    markers[i] = redis.call('GET', groups[i].marker) or false
    rebuilding = rebuilding or markers[i] ~= false
  end
  return markers, rebuilding
end

-- An apply's last steps and its reply: the partition's watermark raised to handled_offset
-- (KEYS[1], field), the batch's rank events appended to the outbox stream (KEYS[2]), then {1,
-- changed, outbox id ('' without events), the events' payload, each overflow slot...}.
local function apply_finish(field, applied, handled_offset, events, changed, overflow)
  if not applied or tonumber(applied) < handled_offset then
    redis.call('HSET', KEYS[1], field, score_str(handled_offset))
  end
  local outbox_id, payload = '', rank_events_payload(events)
  if payload ~= '' then
    outbox_id = redis.call('XADD', KEYS[2], '*', 'events', payload)
  end
  local reply = {1, changed, outbox_id, payload}
  for _, slot in ipairs(overflow) do
    reply[#reply + 1] = slot
  end
  return reply
end
