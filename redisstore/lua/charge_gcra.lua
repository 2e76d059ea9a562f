-- A charge on GCRA (sluice/charge_buckets.go): TAT moves past now + C * T,
-- up to MAX_USAGE µs ahead. TOL keeps what bounds TAT - now at the write,
-- the charge's wait when it exceeds the tolerance (see gcra_at).
local function gcra_charge(key, P, L, C, T, n, now)
  local stored, tolerance
  stored, tolerance, now = gcra_at(key, C, T, now)
  local fits, wait, remaining, retry = bucket_charge(math.max(stored, now) - now, tolerance, T, n)
  if wait == 0 then
    return fits, remaining, retry, 0
  end
  if n > 0 then
    put(key, enc2(now + wait, math.max(tolerance, wait)), now + wait)
  end
  return fits, remaining, retry, wait
end

ALG.gc.charge = gcra_charge
