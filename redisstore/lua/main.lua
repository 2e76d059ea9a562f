-- decide_one: one request on keys[1] with the algorithm alg.
-- argv: now ('' = server TIME), mode, P, L, C, T, n [, ref1, ref2]; modes:
--   'w' decide and write the admission;
--   'd' dry run (header.lua's dry_run), replying no refs (zeros);
--   'r' refund the admission that returned ref1, ref2.
-- Reply: allowed, remaining, retry_after, reset_after, delay, ref1, ref2 as
-- seven packed doubles (a string: far cheaper for Redis than an array).
local function decide_one(alg, keys, argv)
  init(argv[1])
  local key, mode = keys[1], argv[2]
  local P, L, C, T, n = tonumber(argv[3]), tonumber(argv[4]), tonumber(argv[5]), tonumber(argv[6]), tonumber(argv[7])
  if mode == 'r' then
    alg.refund(key, P, L, C, T, n, tonumber(argv[8]), tonumber(argv[9]), NOW)
    return struct.pack('<ddddddd', 0, 0, 0, 0, 0, 0, 0)
  end
  if mode == 'd' then
    local allowed, remaining, retry, reset, delay = dry_run(alg, key, P, L, C, T, n)
    return struct.pack('<ddddddd', allowed, remaining, retry, reset, delay, 0, 0)
  end
  local allowed, remaining, retry, reset, delay, w, reset_at, r1, r2 = alg.decide(key, P, L, C, T, n, NOW)
  if w then
    alg.commit(key, w, reset_at)
  end
  return struct.pack('<ddddddd', allowed and 1 or 0, remaining, retry, reset, delay, r1 or 0, r2 or 0)
end
