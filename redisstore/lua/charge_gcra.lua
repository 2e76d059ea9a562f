-- A charge on GCRA (sluice/charge_buckets.go): TAT moves past now + C * T,
-- up to MAX_USAGE µs ahead. TOL keeps what bounds TAT - now at the write,
-- the charge's wait when it exceeds the tolerance (see gcra_decide).
local function gcra_charge(key, P, L, C, T, n, now)
  local stored, kept = gcra_get(key)
  local tolerance = C * T
  if kept == 0 then
    kept = tolerance
  end
  now = math.max(now, stored - kept)
  local wait = math.max(stored, now) - now
  local add = charge_credit(n, T)
  local fits = wait + add <= tolerance
  wait = math.min(wait + add, MAX_USAGE)
  local retry = 0
  if not fits then
    retry = wait + T - tolerance
  end
  if wait == 0 then
    return fits, floor_div(tolerance, T), retry, 0
  end
  if n > 0 then
    put(key, enc2(now + wait, math.max(tolerance, wait)), now + wait)
  end
  return fits, floor_div(tolerance - wait, T), retry, wait
end

ALG.gc.charge = gcra_charge
