-- Store a board's top-list snapshot unless the stored one is as new or newer: two refreshes
-- may overlap, or one run late, and a reader must never find a snapshot older than one
-- stored before it.
-- KEYS[1] the snapshot (leaderboard/keys.py top_snapshot), KEYS[2] its version
-- (top_snapshot_version), in one slot.
-- ARGV[1] version: an integer, the Redis clock in microseconds when the snapshot's top was read
-- (board_top.lua); ARGV[2] the snapshot's JSON, or '' when the board was not intact (the
-- snapshot is dropped, and its version kept, so an older refresh cannot bring one back);
-- ARGV[3] expiry of both keys, in seconds.
-- Returns 1 when written, 0 when the stored version is the same or newer (nothing written).
if #KEYS ~= 2 or #ARGV ~= 3 or not tonumber(ARGV[1]) or not tonumber(ARGV[3]) then
  return redis.error_reply('top_snapshot_write: expected 2 keys and 3 arguments (version, '
    .. 'snapshot, expiry), got ' .. #KEYS .. ' keys and ' .. #ARGV
    .. ' arguments (caller and script of different versions?)')
end
local stored = redis.call('GET', KEYS[2])
if stored and tonumber(stored) >= tonumber(ARGV[1]) then
  return 0
end
if ARGV[2] == '' then
  redis.call('DEL', KEYS[1])
else
  redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3])
end
redis.call('SET', KEYS[2], ARGV[1], 'EX', ARGV[3])
return 1
