-- Sets one override and publishes the new version.
-- KEYS[1] the policy's hash, KEYS[2] the set of policies with overrides,
-- KEYS[3] the version counter.
-- ARGV: policy, target field, value (JSON), now (µs), max per policy,
-- max total, channel, the prefix of policy hashes.
-- Counting the total reads the other policies' hashes, which are not in
-- KEYS: they share KEYS' hash tag, so they live on the same Cluster slot.
local now = tonumber(ARGV[4])
if redis.call('HEXISTS', KEYS[1], ARGV[2]) == 0 then
  -- Expired overrides do not count against the bounds: drop this policy's.
  local all = redis.call('HGETALL', KEYS[1])
  for i = 1, #all, 2 do
    local e = cjson.decode(all[i + 1]).expires_us
    if e and e > 0 and e <= now then
      redis.call('HDEL', KEYS[1], all[i])
    end
  end
  if redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[5]) then
    return -1
  end
  local total = 0
  for _, p in ipairs(redis.call('SMEMBERS', KEYS[2])) do
    total = total + redis.call('HLEN', ARGV[8] .. p)
  end
  if total >= tonumber(ARGV[6]) then
    return -2
  end
end
redis.call('HSET', KEYS[1], ARGV[2], ARGV[3])
redis.call('SADD', KEYS[2], ARGV[1])
local v = redis.call('INCR', KEYS[3])
redis.call('PUBLISH', ARGV[7], v)
return v
