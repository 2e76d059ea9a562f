-- A charge on a fixed window (sluice/charge_core.go): the count grows past
-- L, and the window's end repays it all.
ALG.fw.charge = function(key, P, L, C, T, n, now)
  local start, count
  now, start, count = fw_at(key, P, now)
  local fits = count + n <= L
  count = math.min(count + n, MAX_USAGE)
  if count == 0 then
    return fits, L, 0, 0
  end
  if n > 0 then
    put(key, enc2(now, count), start + P)
  end
  local reset = start + P - now
  return fits, L - count, fits and 0 or reset, reset
end
