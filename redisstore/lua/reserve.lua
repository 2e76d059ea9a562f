-- reserve_at: take between n and m units on key at one instant (NOW), with
-- the algorithm alg, whose P, L, C, T, n, m are argv[b..b+5]: all m when the
-- policy admits them, else as many as it admits, else (fewer than n) nothing.
-- It returns granted, remaining, retry_after, reset_after, delay, ref1, ref2;
-- when nothing is granted, the denial decide_one gives a request of n.
local function reserve_at(alg, key, argv, b)
  local P, L, C, T, n, m = tonumber(argv[b]), tonumber(argv[b + 1]), tonumber(argv[b + 2]), tonumber(argv[b + 3]), tonumber(argv[b + 4]), tonumber(argv[b + 5])
  local _, left = alg.decide(key, P, L, C, T, 0, NOW)
  local grant = math.min(math.max(m, n), left, C)
  if grant < n then
    grant = n
  end
  local allowed, remaining, retry, reset, delay, w, reset_at, r1, r2 = alg.decide(key, P, L, C, T, grant, NOW)
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
local function reserve_held(alg, key, argv, b)
  HOLD = true
  local g, remaining, retry, reset, delay, r1, r2 = reserve_at(alg, key, argv, b)
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
  return struct.pack('<ddddddd', reserve_held(alg, keys[1], argv, 3))
end
