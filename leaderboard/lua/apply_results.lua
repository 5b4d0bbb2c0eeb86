-- Apply one Kafka partition's batch of counted results to the boards, exactly once.
--
-- KEYS[1]            hash: partition -> highest offset of this topic already on the boards
-- KEYS[2 + 4(i-1)..] board i: the board, its rebuild marker, pending list and delta ZSET
-- ARGV[1]            the partition (hash field)
-- ARGV[2]            the lowest offset among the results below
-- ARGV[3]            the highest offset the caller has handled in this partition
-- ARGV[4]            number of boards n
-- ARGV[5..4+4n]      per board: rule, time_bits, max_points, expire_at (unix seconds, 0 = none)
-- ARGV[5+4n]         the results, one string: "board_index member points ticks xid" entries
--                    separated by ";" (one argument instead of five per result: packing
--                    arguments was the client's largest cost)
--
-- Returns {0, applied_offset} when some of these offsets are already on the boards (another
-- consumer of the partition got there first: the caller drops them and calls again), or
-- {1, changed, overflow...} where overflow lists "board_index member" of cumulative sums the
-- codec cannot hold (those results are left out; nothing is clamped).
--
-- Everything, watermark included, happens in this one atomic call: either the whole batch of
-- the partition is on the boards and the watermark covers it, or none of it is.

local field = ARGV[1]
local min_offset = tonumber(ARGV[2])
local handled_offset = tonumber(ARGV[3])
local applied = redis.call('HGET', KEYS[1], field)
if applied and tonumber(applied) >= min_offset then
  return {0, applied}
end

local nboards = tonumber(ARGV[4])
-- A caller of another argument layout (e.g. a process started before a deploy, running its
-- old Python against this file) must fail loudly: parsed leniently, its results would match
-- nothing and the watermark would move past them, losing them without a word.
if #ARGV ~= 5 + nboards * 4 then
  return redis.error_reply('apply_results: expected ' .. (5 + nboards * 4) .. ' arguments, got '
    .. #ARGV .. ' (caller and script of different versions?)')
end
local packed = ARGV[5 + nboards * 4]
local _, separators = string.gsub(packed, ';', '')
local expected_entries = (packed == '') and 0 or separators + 1
local boards = {}
for i = 1, nboards do
  local a = 4 + (i - 1) * 4
  local k = 1 + (i - 1) * 4
  boards[i] = {
    key = KEYS[k + 1], marker = KEYS[k + 2], pending = KEYS[k + 3], delta = KEYS[k + 4],
    rule = ARGV[a + 1], time_bits = tonumber(ARGV[a + 2]), max_points = tonumber(ARGV[a + 3]),
    expire_at = tonumber(ARGV[a + 4]), writes = {},
  }
end

-- Pass 1: compute every cumulative board score, with no write, so an overflow cannot leave half
-- a batch applied. The best rule cannot overflow: ZADD GT alone compares and writes.
local current = {}   -- "i member" -> score (false = not on the board)
local dirty = {}
local order = {}
local entries = {}
local overflow = {}
local parsed = 0
for si, member, spoints, sticks, sxid in string.gmatch(packed, '(%d+) (%d+) (%d+) (%d+) (%d+)') do
  parsed = parsed + 1
  local i = tonumber(si)
  local board = boards[i]
  local points = tonumber(spoints)
  local ticks = tonumber(sticks)
  local ok = true
  if board.rule == 'best' then
    local scale = 2 ^ board.time_bits
    local writes = board.writes
    writes[#writes + 1] = score_str(points * scale + (scale - 1 - ticks))
    writes[#writes + 1] = member
  else
    local slot = i .. ' ' .. member
    local old = current[slot]
    if old == nil then
      local stored = redis.call('ZSCORE', board.key, member)
      old = stored and tonumber(stored) or false
    end
    local new = merged_score(old or nil, points, ticks, board.rule, board.time_bits, board.max_points)
    if new == false then
      overflow[#overflow + 1] = slot
      ok = false
    elseif new ~= nil then
      current[slot] = new
      if not dirty[slot] then
        dirty[slot] = true
        order[#order + 1] = {i, member}
      end
    else
      current[slot] = old
    end
  end
  if ok then
    entries[#entries + 1] = {i, member, points, ticks, tonumber(sxid)}
  end
end

if parsed ~= expected_entries then
  return redis.error_reply('apply_results: ' .. expected_entries .. ' entries sent, '
    .. parsed .. ' well-formed')
end

-- Pass 2: write, one ZADD per board and up to ZADD_PAIRS members (a call from Lua into Redis
-- costs about as much as the insert itself; unpack stays well inside Lua's stack limit). A board
-- has one rule: ZADD GT for best (a pair repeated in one call keeps the higher score), a plain
-- ZADD of the sums computed above for cumulative.
for _, pair in ipairs(order) do
  local writes = boards[pair[1]].writes
  writes[#writes + 1] = score_str(current[pair[1] .. ' ' .. pair[2]])
  writes[#writes + 1] = pair[2]
end
local ZADD_PAIRS = 500
local changed = 0
for _, board in ipairs(boards) do
  local writes = board.writes
  for first = 1, #writes, 2 * ZADD_PAIRS do
    local last = math.min(first + 2 * ZADD_PAIRS - 1, #writes)
    if board.rule == 'best' then
      changed = changed + redis.call('ZADD', board.key, 'GT', 'CH', unpack(writes, first, last))
    else
      redis.call('ZADD', board.key, unpack(writes, first, last))
      changed = changed + (last - first + 1) / 2
    end
  end
  if #writes > 0 and board.expire_at > 0 then
    redis.call('EXPIREAT', board.key, board.expire_at)
  end
end

-- The rebuild protocol (docs/ingestion.md): while a board is being rebuilt, remember every
-- result its snapshot may not contain, whether or not it changed the live board.
local markers = {}
for _, e in ipairs(entries) do
  local board = boards[e[1]]
  local marker = markers[e[1]]
  if marker == nil then
    marker = redis.call('GET', board.marker) or false
    markers[e[1]] = marker
  end
  if marker == 'pending' then
    redis.call('RPUSH', board.pending,
      score_str(e[5]) .. ' ' .. e[2] .. ' ' .. score_str(e[3]) .. ' ' .. score_str(e[4]))
  elseif marker and not xid_visible(e[5], marker) then
    local res = merge_into(board.delta, e[2], e[3], e[4], board.rule, board.time_bits, board.max_points)
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
