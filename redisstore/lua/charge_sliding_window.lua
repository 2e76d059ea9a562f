-- A charge on a sliding window (sluice/charge_core.go): cur grows past L
-- (at most SW_SPAN / P), and weighs as prev in the next window.
ALG.sw.charge = function(key, P, L, C, T, n, now)
  local start, cur, prev
  now, start, cur, prev = sw_at(key, P, now)
  local e = now - start
  local fits = cur + n <= L and prev * (P - e) <= (L - cur - n) * P
  cur = math.min(cur + n, tdiv(SW_SPAN, P))
  local weight = prev * (P - e)
  local q = tdiv(weight, P)
  if q * P < weight then
    q = q + 1
  end
  local retry = 0
  if not fits then
    retry = sw_retry(P, L, e, cur, prev, 1)
  end
  local reset_at = sw_expiry(P, start, cur, prev)
  if not reset_at then
    return fits, L - cur - q, retry, 0
  end
  if n > 0 then
    put(key, enc3(now, cur, prev), reset_at)
  end
  return fits, L - cur - q, retry, reset_at - now
end
