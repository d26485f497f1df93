-- Redis's fenced write: compare-and-set of a token in a hash, as one script.
-- KEYS[1]: the key. ARGV[1]: redis-benchmark's __rand_int__ (0..9999), used
-- as the die: below 1000 the writer is a stale leader with token 1 (every
-- key is seeded with token 2); otherwise the token is the server's clock in
-- microseconds, since redis-benchmark cannot compute one. ARGV[2]: padding.
local current = tonumber(redis.call('HGET', KEYS[1], 't') or '0')
local token, value
if tonumber(ARGV[1]) < 1000 then
  token, value = 1, 'stale-' .. ARGV[2]
else
  local now = redis.call('TIME')
  token, value = now[1] * 1000000 + now[2], 'fresh-' .. ARGV[2]
end
if token < current then
  redis.call('HINCRBY', 'bench:stats', 'rejected', 1)
  return 0
end
redis.call('HSET', KEYS[1], 't', string.format('%.0f', token), 'v', value)
redis.call('HINCRBY', 'bench:stats', 'accepted', 1)
return 1
