-- Raise a board's applied-offset watermark (after a repair rebuilt the board from PostgreSQL);
-- never lower it: a consumer may have moved it further meanwhile.
-- KEYS[1]  the board's watermark hash (partition -> offset)
-- ARGV     partition, offset, partition, offset, ...
for i = 1, #ARGV, 2 do
  local current = redis.call('HGET', KEYS[1], ARGV[i])
  if not current or tonumber(current) < tonumber(ARGV[i + 1]) then
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
  end
end
return 1
