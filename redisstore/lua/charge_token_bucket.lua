-- A charge on a token bucket (sluice/charge_buckets.go): the missing credit
-- grows past C * T, up to MAX_USAGE µs, and refills at the bucket's rate.
ALG.tb.charge = function(key, P, L, C, T, n, now)
  local last, missing = get2(key)
  local full = C * T
  if now > last then
    missing = math.max(0, missing - (now - last))
    last = now
  end -- else the clock ran backwards: no time has passed
  local add = charge_credit(n, T)
  local fits = missing + add <= full
  missing = math.min(missing + add, MAX_USAGE)
  local retry = 0
  if not fits then
    retry = missing + T - full
  end
  if missing == 0 then
    return fits, floor_div(full, T), retry, 0
  end
  if n > 0 then
    put(key, enc2(last, missing), last + missing)
  end
  return fits, floor_div(full - missing, T), retry, missing
end
