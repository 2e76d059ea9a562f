-- Concurrency (sluice/concurrency.go): keys[1] is a sorted set of the slots
-- held, each member a release token scored by the instant it was acquired
-- (µs on the store's clock). A slot acquired at `at` is held until at + P,
-- unless released before. The key expires when its newest slot's lease ends,
-- and Redis deletes it when its last slot is released.

-- cc_trim drops the slots of key whose lease has ended at now. It returns
-- now, moved up to the newest slot's acquisition when time ran backwards
-- (no time has passed), how many slots are held, and the newest's instant.
local function cc_trim(key, P, now)
  local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if newest[2] == nil then
    return now, 0, 0
  end
  local at = tonumber(newest[2])
  if at > now then
    now = at
  end
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - P)
  return now, redis.call('ZCARD', key), at
end

-- acquire_slot: take one slot of keys[1] named by a token when fewer than L
-- are held; a token '' only looks. argv: now ('' = server TIME), P, L, token.
-- Reply: allowed, remaining, retry_after, reset_after as four packed doubles.
local function acquire_slot(keys, argv)
  init(argv[1])
  local key, P, L, token = keys[1], tonumber(argv[2]), tonumber(argv[3]), argv[4]
  local now, n, newest = cc_trim(key, P, NOW)
  local allowed, retry = 1, 0
  if token ~= '' then
    if n < L then
      redis.call('ZADD', key, now, token)
      n, newest = n + 1, now
      keep(key, now + P)
    else
      -- Slots leave oldest first: the (n-L+1)th to leave brings them under L.
      allowed = 0
      local s = redis.call('ZRANGE', key, n - L, n - L, 'WITHSCORES')
      retry = tonumber(s[2]) + P - now
    end
  end
  local remaining, reset = L - n, 0
  if remaining < 0 then
    remaining = 0
  end
  if n > 0 then
    reset = newest + P - now
  end
  return struct.pack('<dddd', allowed, remaining, retry, reset)
end

-- release_slot: give back the slot of keys[1] that token names, after
-- dropping the expired ones (so a slot whose lease has ended is not held).
-- argv: now ('' = server TIME), P, token. Reply: 1 if it was held, else 0,
-- packed.
local function release_slot(keys, argv)
  init(argv[1])
  local key, P, token = keys[1], tonumber(argv[2]), argv[3]
  local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if newest[2] == nil then
    return struct.pack('<d', 0)
  end
  local now = NOW
  if tonumber(newest[2]) > now then
    now = tonumber(newest[2]) -- time ran backwards: no time has passed
  end
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - P)
  if redis.call('ZREM', key, token) == 0 then
    return struct.pack('<d', 0)
  end
  if newest[1] == token then
    -- The newest left: keep the key only as long as the rest (Redis
    -- deletes it if it was the last).
    local rest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')[2]
    if rest then
      keep(key, tonumber(rest) + P)
    end
  end
  return struct.pack('<d', 1)
end
