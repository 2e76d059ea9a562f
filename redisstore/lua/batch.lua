-- decide_all: all or nothing over keys[1..k], which share one node.
-- argv: now ('' = server TIME), then for each key: algorithm code, P, L, C, T, n.
-- Every request is decided before anything is written. If all are admitted,
-- all are written; otherwise nothing is, and every key reports its state as a
-- peek sees it, denied, with the largest retry_after among the denials.
-- Reply: {allowed, remaining, retry_after, reset_after, delay} per key.
local function decide_all(keys, argv)
  init(argv[1])
  local k = #keys
  local out, algs, params, writes, resets = {}, {}, {}, {}, {}
  local ok, wait = true, 0
  for i = 1, k do
    local b = 2 + (i - 1) * 6
    local alg = ALG[argv[b]]
    local p = { tonumber(argv[b + 1]), tonumber(argv[b + 2]), tonumber(argv[b + 3]), tonumber(argv[b + 4]), tonumber(argv[b + 5]) }
    local allowed, remaining, retry, reset, delay, w, reset_at = alg.decide(keys[i], p[1], p[2], p[3], p[4], p[5], NOW)
    local o = (i - 1) * 5
    out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5] = allowed and 1 or 0, remaining, retry, reset, delay
    algs[i], params[i], writes[i], resets[i] = alg, p, w or false, reset_at
    if not allowed then
      ok = false
      wait = math.max(wait, retry)
    end
  end
  for i = 1, k do
    if ok then
      if writes[i] then
        algs[i].commit(keys[i], writes[i], resets[i])
      end
    else
      local p, o = params[i], (i - 1) * 5
      local _, remaining, _, reset, delay = algs[i].decide(keys[i], p[1], p[2], p[3], p[4], 0, NOW)
      out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5] = 0, remaining, wait, reset, delay
    end
  end
  return out
end
