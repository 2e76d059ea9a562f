-- Demand boards (sluice.DemandBoard): one hash per board, keys[1]. Each field
-- is a member; its value is "<expires µs> <value>", the value as the client
-- formatted it (never parsed here, so it comes back exactly). The hash lives
-- as long as its longest-lived entry; a read drops the expired ones. A post
-- or a read of many entries is many calls of a bounded number each, so that
-- no call keeps Redis from other clients for long.

-- board_server is the server's TIME in µs.
local function board_server()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- board_now is argv's clock (µs), or the server's TIME when it is 0.
local function board_now(arg)
  local now = tonumber(arg)
  if now == nil or now == 0 then
    now = board_server()
  end
  return now
end

-- board_keep keeps key until its entry expiring at expires (µs on the
-- store's clock, ttl from now) has expired: until the later of expires read
-- as a Unix time and ttl after the server's now, as the decisions' keys are
-- kept (header.lua's expiry). A client clock behind the server's then never
-- drops the board early, and one that runs slower than real time (a test's,
-- a simulation's) never has Redis drop, on its own clock, entries still live
-- on the client's.
local function board_keep(key, expires, ttl)
  local srv = board_server()
  local keep = math.ceil(math.max(expires, srv + ttl) / 1000)
  local pttl = redis.call('PTTL', key)
  if pttl < 0 or math.floor(srv / 1000) + pttl < keep then
    redis.call('PEXPIREAT', key, string.format('%.0f', keep))
  end
end

-- board_post: argv now, ttl µs, then member, value pairs. Reply: {0}.
local function board_post(keys, argv)
  local now = board_now(argv[1])
  local ttl = tonumber(argv[2])
  local expires = now + ttl
  local at = string.format('%.0f', expires) .. ' '
  local fields = {}
  for i = 3, #argv, 2 do
    fields[#fields + 1] = argv[i]
    fields[#fields + 1] = at .. argv[i + 1]
  end
  if #fields > 0 then
    redis.call('HSET', keys[1], unpack(fields))
    board_keep(keys[1], expires, ttl)
  end
  return { 0 }
end

-- board_read: argv now, HSCAN cursor, COUNT. Reply: the next cursor ("0"
-- when the scan is done), then member, value, member, value... of the live
-- entries among those scanned. An entry on the board for the whole scan is
-- returned at least once (HSCAN's guarantee); one may come twice.
local function board_read(keys, argv)
  local now = board_now(argv[1])
  local scan = redis.call('HSCAN', keys[1], argv[2], 'COUNT', argv[3])
  local all = scan[2]
  local out, dead = { scan[1] }, {}
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
