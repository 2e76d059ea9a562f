-- Removes one override; returns 0 when there was none, else the new version,
-- which it publishes.
-- KEYS[1] the policy's hash, KEYS[2] the set of policies, KEYS[3] the version.
-- ARGV: policy, target field, channel.
if redis.call('HDEL', KEYS[1], ARGV[2]) == 0 then
  return 0
end
if redis.call('HLEN', KEYS[1]) == 0 then
  redis.call('SREM', KEYS[2], ARGV[1])
end
local v = redis.call('INCR', KEYS[3])
redis.call('PUBLISH', ARGV[3], v)
return v
