-- reserve_one: take between n and m units on keys[1] at one instant, with
-- the algorithm alg: all m when the policy admits them, else as many as it
-- admits, else (fewer than n) nothing.
-- argv: now ('' = server TIME), 'v', P, L, C, T, n, m.
-- Reply: {granted, remaining, retry_after, reset_after, delay, ref1, ref2};
-- when nothing is granted, the denial decide_one gives a request of n.
local function reserve_one(alg, keys, argv)
  init(argv[1])
  local key = keys[1]
  local P, L, C, T, n, m = tonumber(argv[3]), tonumber(argv[4]), tonumber(argv[5]), tonumber(argv[6]), tonumber(argv[7]), tonumber(argv[8])
  local _, left = alg.decide(key, P, L, C, T, 0, NOW)
  local grant = math.min(math.max(m, n), left, C)
  if grant < n then
    grant = n
  end
  local allowed, remaining, retry, reset, delay, w, reset_at, r1, r2 = alg.decide(key, P, L, C, T, grant, NOW)
  if not allowed then
    return { 0, remaining, retry, reset, delay, 0, 0 }
  end
  if w then
    alg.commit(key, w, reset_at)
  end
  return { grant, remaining, retry, reset, delay, r1 or 0, r2 or 0 }
end
