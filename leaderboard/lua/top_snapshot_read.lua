-- A board's top-list snapshot, only if it is newer than the one the caller holds: each API
-- process checks once a second (or when a client has seen a newer version), and the snapshot
-- itself (up to 1,000 entries) crosses the network once per version.
-- KEYS[1] the snapshot (leaderboard/keys.py top_snapshot), KEYS[2] its version
-- (top_snapshot_version). ARGV[1] the version the caller holds (0: none).
-- Returns {} when no version is stored (never written, or expired); {version} when the stored
-- version is not newer than ARGV[1]; {version, snapshot} when it is, the snapshot nil when it
-- was dropped (the board was not intact at that refresh).
if #KEYS ~= 2 or #ARGV ~= 1 or not tonumber(ARGV[1]) then
  return redis.error_reply('top_snapshot_read: expected 2 keys and 1 argument (held version), '
    .. 'got ' .. #KEYS .. ' keys and ' .. #ARGV
    .. ' arguments (caller and script of different versions?)')
end
local version = redis.call('GET', KEYS[2])
if not version then
  return {}
end
if tonumber(version) <= tonumber(ARGV[1]) then
  return {version}
end
return {version, redis.call('GET', KEYS[1])}
