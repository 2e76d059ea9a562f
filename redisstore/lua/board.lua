-- Demand boards (sluice.DemandBoard): one hash per board, keys[1]. Each field
-- is a member; its value is "<expires µs> <value>", the value as the client
-- formatted it (never parsed here, so it comes back exactly). The hash lives
-- as long as its longest-lived entry; a read drops the expired ones.

-- board_now is argv's clock (µs), or the server's TIME when it is 0.
local function board_now(arg)
  local now = tonumber(arg)
  if now == nil or now == 0 then
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  end
  return now
end

-- board_post: argv now, ttl µs, then member, value pairs. Reply: {0}.
local function board_post(keys, argv)
  local now = board_now(argv[1])
  local ttl = tonumber(argv[2])
  local expires = string.format('%.0f', now + ttl)
  for i = 3, #argv, 2 do
    redis.call('HSET', keys[1], argv[i], expires .. ' ' .. argv[i + 1])
  end
  local ms = math.ceil(ttl / 1000)
  if redis.call('PTTL', keys[1]) < ms then
    redis.call('PEXPIRE', keys[1], ms)
  end
  return { 0 }
end

-- board_read: argv now. Reply: member, value, member, value... of the live
-- entries.
local function board_read(keys, argv)
  local now = board_now(argv[1])
  local all = redis.call('HGETALL', keys[1])
  local out, dead = {}, {}
  for i = 1, #all, 2 do
    local v = all[i + 1]
    local sp = string.find(v, ' ', 1, true)
    if sp == nil or tonumber(string.sub(v, 1, sp - 1)) <= now then
      dead[#dead + 1] = all[i]
    else
      out[#out + 1] = all[i]
      out[#out + 1] = string.sub(v, sp + 1)
    end
  end
  -- HDEL in chunks: unpack has a limit on how many values it returns.
  for i = 1, #dead, 1000 do
    redis.call('HDEL', keys[1], unpack(dead, i, math.min(i + 999, #dead)))
  end
  return out
end
