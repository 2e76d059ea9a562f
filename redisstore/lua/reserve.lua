-- reserve: take between n and m units on KEYS[1] at one instant, with the
-- algorithm `alg` (the line scripts.go puts before this file): all m when the
-- policy admits them, else as many as it admits, else (fewer than n) nothing.
-- ARGV: now ('' = server TIME), 'v', P, L, C, T, n, m.
-- Reply: {granted, remaining, retry_after, reset_after, delay, ref1, ref2};
-- when nothing is granted, the denial main.lua gives a request of n.
init(ARGV[1])
local key = KEYS[1]
local P, L, C, T, n, m = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
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
