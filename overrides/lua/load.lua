-- Reads every override at one version: {version, policy, target, value, ...}.
-- KEYS[1] the set of policies, KEYS[2] the version.
-- ARGV[1] the prefix of policy hashes (same hash tag as KEYS, same slot).
local out = {tonumber(redis.call('GET', KEYS[2]) or '0')}
for _, p in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local all = redis.call('HGETALL', ARGV[1] .. p)
  for i = 1, #all, 2 do
    out[#out + 1] = p
    out[#out + 1] = all[i]
    out[#out + 1] = all[i + 1]
  end
end
return out
