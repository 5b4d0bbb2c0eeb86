-- board_page.lua for a board with tie-break columns (common.lua, "wide keys"): a slice by
-- position, with the competition rank of its first entry.
-- KEYS[1] the board's sorted set; KEYS[2..], when given, its guard keys (as board_page.lua).
-- ARGV[1] start, ARGV[2] stop (0-based positions, inclusive, best first), ARGV[3] the board's
-- key length (the members are key .. player).
-- Returns {first_rank, {member, ...}}; first_rank is 0 when empty, -1 when a guard key is
-- missing. Players with equal keys share a rank (1 + the members of a strictly better key:
-- every member of a key below K sorts below K itself, and K .. player above it).
if #ARGV ~= 3 or not tonumber(ARGV[3]) then
  return redis.error_reply('wide_board_page: expected 3 arguments, got ' .. #ARGV)
end
if keys_missing(2) then
  return -1
end
local range = redis.call('ZRANGE', KEYS[1], ARGV[1], ARGV[2])
if #range == 0 then
  return {0, range}
end
local first_key = string.sub(range[1], 1, tonumber(ARGV[3]))
return {redis.call('ZLEXCOUNT', KEYS[1], '-', '(' .. first_key) + 1, range}
