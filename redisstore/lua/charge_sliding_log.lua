-- A charge on a sliding log (sluice/charge_core.go): one more entry, or,
-- when the log already holds L live entries or would pass MAX_USAGE units,
-- the newest entry takes the charge's units and moves to now.
ALG.sl.charge = function(key, P, L, C, T, n, now)
  local len, first, cum, sum, newest
  len, first, cum, sum, newest, now = sl_live(key, P, now)
  local fits = sum + n <= L
  if n > 0 then
    local add = math.min(n, MAX_USAGE - sum)
    if cum + add > MAX_USAGE then
      -- Only differences of the running totals are read: start them again
      -- from the oldest live entry, so that they stay exact.
      local base = cum - sum
      for j = first, len - 1 do
        local ets, ecost, ecum = sl_at(key, j)
        redis.call('LSET', key, j, enc3(ets, ecost, ecum - base))
      end
      cum = sum
    end
    if add == n and len - first < L then
      ALG.sl.commit(key, { first, len, enc3(now, n, cum + n) }, now + P)
      len = len - first + 1
    else
      local _, ncost, ncum = sl_at(key, -1)
      if first > 0 then
        redis.call('LTRIM', key, first, -1)
      end
      redis.call('LSET', key, -1, enc3(now, ncost + add, ncum + add))
      keep(key, now + P)
      len = len - first
    end
    first, sum, cum, newest = 0, sum + add, cum + add, now
  end
  local retry = 0
  if not fits then
    -- The oldest live entry whose departure leaves room for one unit.
    local i = sl_first(key, first, len - 1, true, cum + 1 - L)
    retry = sl_at(key, i) + P - now
  end
  if not newest then
    return fits, L - sum, retry, 0
  end
  return fits, L - sum, retry, newest + P - now
end
