-- reset_key forgets one key's state, keys[1]. Reply: {1} if it existed, else {0}.
local function reset_key(keys)
  return { redis.call('DEL', keys[1]) }
end
