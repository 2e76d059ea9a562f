-- Sluice: helpers shared by every script. The function library (Redis 7+)
-- is this header, every algorithm's file, main.lua, reserve.lua, batch.lua,
-- reset.lua and slots.lua, loaded once; a script (EVALSHA, the fall-back) is
-- the files it needs and one line calling decide_one, reserve_one,
-- decide_batch, reset_key, acquire_slot or release_slot. scripts.go
-- assembles them.
--
-- Lua numbers are doubles. Every quantity here is an integer below 2^53
-- (sluice.Policy.Validate sees to that), so + - * are exact and division goes
-- through tdiv. States and replies are little-endian doubles packed with
-- struct (exact for those integers): no number is formatted or parsed as
-- text on the way, which would cost more than the decision itself. (The
-- function library cannot bind struct's functions to locals: its load-time
-- environment has no struct.)

-- ALG maps an algorithm's code (the key suffix) to {decide, commit, refund}:
--   decide(key, P, L, C, T, n, now) returns, without writing anything:
--     allowed (boolean), remaining, retry_after, reset_after, delay,
--     w (what commit writes; nil when nothing changes),
--     reset_at (store clock µs when the new state is initial again),
--     ref1, ref2 (what refund needs to undo this admission).
--   commit(key, w, reset_at) writes the admission.
--   refund(key, P, L, C, T, n, ref1, ref2, now) undoes an admission.
-- P period µs, L limit, C capacity, T emission interval µs, n cost.
local ALG = {}

-- NOW is the request's instant on the store's clock (client clock or server
-- TIME), SRV the server's TIME once read (0 before): expiries are set on the
-- server's clock whichever clock decides. In the function library they
-- outlive a call, so init sets both on every call.
local NOW, SRV = 0, 0

-- EXP_AT is the reset_at whose expiry EXP_ARG holds (see expiry_arg), nil
-- when none: it holds for one call only, as SRV does.
local EXP_AT = nil

local function servertime()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- decide_batch reads and writes the string state of a key once for a run of
-- requests on it, however many: while HOLD is set, HELD says the key's value is
-- held in HELD_VAL (false for a missing key) and DIRTY that it awaits its SET,
-- to expire as of HELD_AT. In the function library they outlive a call, so
-- init clears them.
local HOLD, HELD, HELD_VAL, DIRTY, HELD_AT = false, false, false, false, 0

-- FETCHED maps the keys of a batch to their values, read with one MGET
-- before it decides (false: missing, or not a string), each until it is
-- written; nil when nothing was fetched. One MGET costs Redis far less than
-- a GET per key. In the function library it outlives a call, so init clears it.
local FETCHED = nil

-- SPACK and SUNPACK are struct.pack and struct.unpack, which states are
-- written and read with, set by init: an upvalue costs less than two table
-- look-ups per use, and the library cannot bind them when it loads.
local SPACK, SUNPACK

-- init reads the clock: ARGV's now when the client passes one, else TIME.
local function init(arg)
  HOLD, HELD, HELD_VAL, DIRTY, FETCHED, EXP_AT = false, false, false, false, nil, nil
  SPACK, SUNPACK = struct.pack, struct.unpack
  local now = tonumber(arg)
  if now then
    NOW, SRV = now, 0
  else
    NOW = servertime()
    SRV = NOW
  end
end

-- tdiv is Go's a / b for b > 0, truncated toward zero. The double quotient of
-- a large a may round onto the next integer, so it is corrected exactly.
local function tdiv(a, b)
  if a < 0 then
    return -tdiv(-a, b)
  end
  -- q - q % 1 is math.floor(q) for q >= 0, exactly, without looking up two
  -- globals on a path every decision takes several times.
  local q = a / b
  q = q - q % 1
  if q * b > a then
    q = q - 1
  elseif (q + 1) * b <= a then
    q = q + 1
  end
  return q
end

-- EXP_MS and EXP_ARG hold the last expiry as a number and as the text given
-- to Redis: a number argument is formatted by Redis with %.17g, which costs
-- more than a SET's own work, while the keys of a batch mostly expire in the
-- same millisecond (a window's end; a bucket far from its limit).
local EXP_MS, EXP_ARG = 0, '0'

-- expiry_arg is the Unix ms for PEXPIREAT or PXAT, as the text of an
-- integer, that keeps a key until its state is initial: at reset_at on the
-- store's clock, which is (reset_at - NOW) µs after the server's now. With
-- server time the two are one instant. With a client clock the later of the
-- two is kept, so a client clock running behind the server's cannot expire
-- state early — early expiry forgets consumption and over-admits — and a test
-- clock set in the future keeps state exactly as long as it says. An expiry
-- at w keeps a key through the whole millisecond w, so w = ceil(t / 1000) - 1
-- keeps it until t and less than 1ms longer. Within a call the same reset_at
-- gives the same text (EXP_AT, which init clears): a batch's keys mostly
-- reset at one instant.
local function expiry_arg(reset_at)
  if reset_at == EXP_AT then
    return EXP_ARG
  end
  if SRV == 0 then
    SRV = servertime()
  end
  local t = SRV + (reset_at - NOW)
  if reset_at > t then
    t = reset_at
  end
  local ms = tdiv(t + 999, 1000) - 1
  if ms ~= EXP_MS then
    EXP_MS, EXP_ARG = ms, string.format('%d', ms)
  end
  EXP_AT = reset_at
  return EXP_ARG
end

-- keep sets key to expire once its state is initial.
local function keep(key, reset_at)
  redis.call('PEXPIREAT', key, expiry_arg(reset_at))
end

-- put stores a string state with its expiry: one SET with PXAT (Redis 6.2+)
-- in the function library, SET and PEXPIREAT in the scripts, which must also
-- run on older servers. PXAT is set by the line scripts.go puts first.
local function put(key, value, reset_at)
  if HOLD then
    HELD, HELD_VAL, DIRTY, HELD_AT = true, value, true, reset_at
    return
  end
  if FETCHED then
    FETCHED[key] = nil
  end
  if PXAT then
    redis.call('SET', key, value, 'PXAT', expiry_arg(reset_at))
  else
    redis.call('SET', key, value)
    keep(key, reset_at)
  end
end

-- release ends HOLD, writing the held state of key if it changed.
local function release(key)
  HOLD = false
  if DIRTY then
    put(key, HELD_VAL, HELD_AT)
  end
  HELD, HELD_VAL, DIRTY = false, false, false
end

-- read returns key's string value (false if missing), held while HOLD is set.
local function read(key)
  if HELD then
    return HELD_VAL
  end
  local v = FETCHED and FETCHED[key]
  if v == nil then
    v = redis.call('GET', key)
  end
  if HOLD then
    HELD, HELD_VAL = true, v
  end
  return v
end

-- del deletes key; a batch reading it again finds it missing.
local function del(key)
  if FETCHED then
    FETCHED[key] = false
  end
  redis.call('DEL', key)
end

-- prefetch reads the values of keys with one MGET, for read.
local function prefetch(keys)
  local vals = redis.call('MGET', unpack(keys))
  FETCHED = {}
  for i = 1, #keys do
    FETCHED[keys[i]] = vals[i]
  end
end

-- A state of one, two or three integers is stored as a zero byte and that
-- many doubles (struct '<xd', '<xdd', '<xddd'); enc1 to enc3 write it, get1
-- to get3 read it, a missing key being the initial state, all zeros. A state
-- that does not start with a zero byte is the decimal text ("a", "a:b",
-- "a:b:c") of an earlier version of Sluice, still read.
local function enc1(a)
  return SPACK('<xd', a)
end

local function enc2(a, b)
  return SPACK('<xdd', a, b)
end

local function enc3(a, b, c)
  return SPACK('<xddd', a, b, c)
end

local function get1(key)
  local v = read(key)
  if not v then
    return 0
  elseif string.byte(v) ~= 0 then
    return tonumber(v)
  end
  return (SUNPACK('<xd', v))
end

local function get2(key)
  local v = read(key)
  if not v then
    return 0, 0
  elseif string.byte(v) ~= 0 then
    local a, b = string.match(v, '^(-?%d+):(-?%d+)$')
    return tonumber(a), tonumber(b)
  end
  local a, b = SUNPACK('<xdd', v)
  return a, b
end

local function get3(key)
  local v = read(key)
  if not v then
    return 0, 0, 0
  elseif string.byte(v) ~= 0 then
    local a, b, c = string.match(v, '^(-?%d+):(-?%d+):(-?%d+)$')
    return tonumber(a), tonumber(b), tonumber(c)
  end
  local a, b, c = SUNPACK('<xddd', v)
  return a, b, c
end

-- dry_run decides a request of n on key with the algorithm alg and writes
-- nothing: allowed (1 or 0) and retry_after as the request would get them,
-- remaining, reset_after and delay as a peek sees the key — what each key of
-- a denied all-or-nothing set answers. main.lua's mode 'd' and decide_batch's
-- 'd' record (a spread set's first step, crossslot.go) both reply it.
local function dry_run(alg, key, P, L, C, T, n)
  local allowed, _, retry = alg.decide(key, P, L, C, T, n, NOW)
  local _, remaining, _, reset, delay = alg.decide(key, P, L, C, T, 0, NOW)
  return allowed and 1 or 0, remaining, retry, reset, delay
end
