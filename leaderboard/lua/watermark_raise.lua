-- Raise a board's applied-offset watermark after a recovery, never lower it.
-- KEYS[1] the watermark hash (leaderboard/keys.py ingest_applied_offsets).
-- ARGV: field, offset, field, offset, ... (partition -> highest offset whose results PostgreSQL
-- held when the recovery read them; see docs/ingestion.md "Redis losing data").
-- A field is set only when it is missing or lower: ingestion may have moved it meanwhile, in
-- its own atomic call, and lowering it would let a redelivery count a result twice.
for i = 1, #ARGV, 2 do
  local current = redis.call('HGET', KEYS[1], ARGV[i])
  if not current or tonumber(current) < tonumber(ARGV[i + 1]) then
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
  end
end
return 1
