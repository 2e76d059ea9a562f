-- main: one request on KEYS[1] with the algorithm `alg` (the line scripts.go
-- puts before this file).
-- ARGV: now ('' = server TIME), mode, P, L, C, T, n [, ref1, ref2]; modes:
--   'w' decide and write the admission;
--   'd' dry run: decide, write nothing, and report the key as a peek sees it
--       (what a denied all-or-nothing batch answers);
--   'r' refund the admission that returned ref1, ref2.
-- Reply: {allowed, remaining, retry_after, reset_after, delay, ref1, ref2}.
init(ARGV[1])
local key, mode = KEYS[1], ARGV[2]
local P, L, C, T, n = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
if mode == 'r' then
  alg.refund(key, P, L, C, T, n, tonumber(ARGV[8]), tonumber(ARGV[9]), NOW)
  return { 0, 0, 0, 0, 0, 0, 0 }
end
local allowed, remaining, retry, reset, delay, w, reset_at, r1, r2 = alg.decide(key, P, L, C, T, n, NOW)
if mode == 'd' then
  local _
  _, remaining, _, reset, delay = alg.decide(key, P, L, C, T, 0, NOW)
elseif w then
  alg.commit(key, w, reset_at)
end
return { allowed and 1 or 0, remaining, retry, reset, delay, r1 or 0, r2 or 0 }
