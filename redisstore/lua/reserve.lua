-- reserve_at: take between n and m units on key at one instant (NOW), with
-- the algorithm alg and the policy P, L, C, T: all m when the policy admits
-- them, else as many as it admits, else (fewer than n) nothing.
-- It returns granted, remaining, retry_after, reset_after, delay, ref1, ref2;
-- when nothing is granted, the denial decide_one gives a request of n.
-- remaining is exact (a request of that many is admitted, of one more
-- denied), so when all that is asked is admitted one decide does it; only a
-- denial peeks for what is left (as sluice.Reserve).
local function reserve_at(alg, key, P, L, C, T, n, m)
  local grant = m < C and m or C
  if grant < n then
    grant = n
  end
  local allowed, remaining, retry, reset, delay, w, reset_at, r1, r2 = alg.decide(key, P, L, C, T, grant, NOW)
  if not allowed and grant > n then
    local _, left = alg.decide(key, P, L, C, T, 0, NOW)
    grant = math.max(math.min(left, grant - 1), n) -- grant was denied
    allowed, remaining, retry, reset, delay, w, reset_at, r1, r2 = alg.decide(key, P, L, C, T, grant, NOW)
  end
  if not allowed then
    return 0, remaining, retry, reset, delay, 0, 0
  end
  if w then
    alg.commit(key, w, reset_at)
  end
  return grant, remaining, retry, reset, delay, r1 or 0, r2 or 0
end

-- reserve_held is reserve_at reading and writing key once (HOLD): the
-- peek and the admission share one read, and a write follows only a grant.
local function reserve_held(alg, key, P, L, C, T, n, m)
  HOLD = true
  local g, remaining, retry, reset, delay, r1, r2 = reserve_at(alg, key, P, L, C, T, n, m)
  release(key)
  return g, remaining, retry, reset, delay, r1, r2
end

-- reserve_one: one reservation on keys[1] with the algorithm alg.
-- argv: now ('' = server TIME), 'v', P, L, C, T, n, m.
-- Reply: granted, remaining, retry_after, reset_after, delay, ref1, ref2 as
-- seven packed doubles. Reservations queued behind a call go in decide_batch
-- (batch.lua), with the decisions.
local function reserve_one(alg, keys, argv)
  init(argv[1])
  return struct.pack('<ddddddd', reserve_held(alg, keys[1], tonumber(argv[3]), tonumber(argv[4]), tonumber(argv[5]),
    tonumber(argv[6]), tonumber(argv[7]), tonumber(argv[8])))
end
