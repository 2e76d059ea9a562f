-- Token bucket (sluice/token_bucket.go). State (last, missing): the last
-- refill and the credit missing from a full bucket, in µs (units x T).
ALG.tb = {
  decide = function(key, P, L, C, T, n, now)
    local last, missing = get2(key)
    local full = C * T
    if now > last then
      missing = math.max(0, missing - (now - last))
      last = now
    end -- else the clock ran backwards: no time has passed
    local allowed, retry = false, 0
    if n == 0 or missing + n * T <= full then -- a peek is allowed past a shrunk bucket
      missing = missing + n * T
      allowed = true
    else
      retry = missing + n * T - full
    end
    local remaining = tdiv(math.max(0, full - missing), T)
    if missing == 0 then
      return allowed, remaining, retry, 0, 0
    end
    local w
    if allowed and n > 0 then
      w = enc2(last, missing)
    end
    -- The bucket is full again at last + missing (later than now + missing
    -- if the clock ran backwards); the key must live that long.
    return allowed, remaining, retry, missing, 0, w, last + missing, last, 0
  end,

  commit = put,

  -- refund gives back n*T of credit admitted when the refill time became
  -- ref1. Refill since then may have been absorbed by those units (the bucket
  -- would otherwise have been full and wasted it), at most the time the
  -- refill advanced since ref1; that part is not given back, so a refund
  -- never makes the bucket fuller than it would be without the admission.
  refund = function(key, P, L, C, T, n, last1, _, now)
    local last, missing = get2(key)
    if missing == 0 then
      return
    end
    missing = math.max(0, missing - math.max(0, n * T - math.max(0, last - last1)))
    local left = missing
    if now > last then
      left = missing - (now - last)
    end
    if left <= 0 then
      del(key)
    else
      put(key, enc2(last, missing), last + missing)
    end
  end,
}
