-- hashstate_batch: keys[1] is the hash; argv is now, P, L, C, T, n and the
-- fields, one GCRA request of n on each, replied as decide_batch replies.
-- The hash is kept until the latest reset of any field written to it.
local HOUT = {}

local function hashstate_batch(keys, argv)
  init(argv[1])
  local h, n = keys[1], #argv - 6
  local vals = redis.call('HMGET', h, unpack(argv, 7, #argv))
  FETCHED = {}
  for i = 1, n do
    FETCHED[argv[6 + i]] = vals[i]
  end
  HNP, HMAX = 0, 0
  local P, L, C, T, c = tonumber(argv[2]), tonumber(argv[3]), tonumber(argv[4]), tonumber(argv[5]), tonumber(argv[6])
  local out, o = HOUT, 0
  for i = 1, n do
    local key = argv[6 + i]
    local allowed, remaining, retry, reset, delay, w, reset_at = gcra_decide(key, P, L, C, T, c, NOW)
    if w then
      put(key, w, reset_at)
    end
    out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5] = allowed and 1 or 0, remaining, retry, reset, delay
    o = o + 5
  end
  if HNP > 0 then
    redis.call('HSET', h, unpack(HPEND, 1, 2 * HNP))
    local exp = expiry_arg(HMAX)
    if redis.call('PEXPIRETIME', h) < tonumber(exp) then
      redis.call('PEXPIREAT', h, exp)
    end
  end
  return struct.pack('<' .. string.rep('d', o), unpack(out, 1, o))
end

redis.register_function('sluice_hashstate_batch', hashstate_batch)
