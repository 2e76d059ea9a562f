-- decide_seq: several requests on keys[1], all with the algorithm alg and one
-- policy, decided and written one after the other in order at one instant:
-- each gets exactly what it would have got alone in that order; the state is
-- read once and written once, after the last. Concurrent decisions on one hot
-- key share a call this way.
-- argv: now ('' = server TIME), P, L, C, T, then each request's n.
-- Reply: allowed, remaining, retry_after, reset_after, delay per request, as
-- packed doubles.
local function decide_seq(alg, keys, argv)
  init(argv[1])
  HOLD = true -- one GET and at most one SET for the group (the sliding log's list excepted)
  local key = keys[1]
  local P, L, C, T = tonumber(argv[2]), tonumber(argv[3]), tonumber(argv[4]), tonumber(argv[5])
  local out = {}
  for i = 6, #argv do
    local allowed, remaining, retry, reset, delay, w, reset_at = alg.decide(key, P, L, C, T, tonumber(argv[i]), NOW)
    if w then
      alg.commit(key, w, reset_at)
    end
    local o = (i - 6) * 5
    out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5] = allowed and 1 or 0, remaining, retry, reset, delay
  end
  release(key)
  return struct.pack('<' .. string.rep('d', #out), unpack(out))
end
