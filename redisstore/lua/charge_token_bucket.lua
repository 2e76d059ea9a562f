-- A charge on a token bucket (sluice/charge_buckets.go): the missing credit
-- grows past C * T, up to MAX_USAGE µs, and refills at the bucket's rate.
ALG.tb.charge = function(key, P, L, C, T, n, now)
  local last, missing = tb_at(key, now)
  local fits, remaining, retry
  fits, missing, remaining, retry = bucket_charge(missing, C * T, T, n)
  if missing == 0 then
    return fits, remaining, retry, 0
  end
  if n > 0 then
    put(key, enc2(last, missing), last + missing)
  end
  return fits, remaining, retry, missing
end
