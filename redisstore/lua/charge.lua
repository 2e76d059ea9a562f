-- Charges (sluice/charge_core.go, sluice/charge_buckets.go): usage that
-- already happened, recorded whether or not the limit has room for it, so a
-- key may owe units. Each algorithm's file charge_<algorithm>.lua defines
-- ALG.<code>.charge(key, P, L, C, T, n, now), which writes the charge and
-- returns allowed (the cost fitted), remaining (negative while owed),
-- retry_after (until one unit is admitted, 0 when it fitted) and
-- reset_after. This file comes first: they use its helpers.

-- MAX_USAGE (2^52) caps what a key can owe: the units of a fixed window or
-- a log, the µs of credit a bucket misses. A sliding window holds at most
-- 2^53 / P units per window (SW_SPAN / P). The callers cap a charge's n at
-- MAX_USAGE (sluice.MaxCharge), so every sum below stays exact.
local MAX_USAGE = 4503599627370496
local SW_SPAN = 9007199254740992

-- floor_div is a / b rounded down, for b > 0: a bucket owing half a unit
-- has -1 left, not 0.
local function floor_div(a, b)
  local q = tdiv(a, b)
  if a < 0 and q * b ~= a then
    q = q - 1
  end
  return q
end

-- bucket_charge charges n units to a bucket of full µs of credit that
-- misses missing µs of it. It returns allowed, what it misses then,
-- remaining and retry_after. The credit n units take, n * T µs, is for a
-- charge so large that it would not be exact enough to reach the cap on its
-- own.
local function bucket_charge(missing, full, T, n)
  local add = math.min(n, tdiv(MAX_USAGE, T) + 1) * T
  local fits = missing + add <= full
  missing = math.min(missing + add, MAX_USAGE)
  local retry = 0
  if not fits then
    retry = missing + T - full
  end
  return fits, missing, floor_div(full - missing, T), retry
end

-- charge_one: one charge on keys[1] with the algorithm alg.
-- argv: now ('' = server TIME), 'c', P, L, C, T, n: decide_one's layout.
-- Reply: allowed, remaining, retry_after, reset_after, 0 as five packed
-- doubles, the start of decide_one's.
local function charge_one(alg, keys, argv)
  init(argv[1])
  local allowed, remaining, retry, reset = alg.charge(keys[1], tonumber(argv[3]), tonumber(argv[4]), tonumber(argv[5]), tonumber(argv[6]), tonumber(argv[7]), NOW)
  return struct.pack('<ddddd', allowed and 1 or 0, remaining, retry, reset, 0)
end

-- charge_batch: the charges queued for one node while its previous charge
-- call was in flight (coalesce.go), and ChargeAll's sets, at one instant, in
-- order. argv: now ('' = server TIME), then per key of keys: code, P, L, C,
-- T, n. Reply: charge_one's five integers per charge, in order.
local function charge_batch(keys, argv)
  init(argv[1])
  local out = {}
  for i = 1, #keys do
    local a, o = 2 + (i - 1) * 6, (i - 1) * 5
    local allowed, remaining, retry, reset = ALG[argv[a]].charge(keys[i], tonumber(argv[a + 1]), tonumber(argv[a + 2]), tonumber(argv[a + 3]), tonumber(argv[a + 4]), tonumber(argv[a + 5]), NOW)
    out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5] = allowed and 1 or 0, remaining, retry, reset, 0
  end
  return out
end
