-- GCRA (sluice/gcra.go). State (tat): the theoretical arrival time. gcra_decide also serves the leaky bucket, which reports the wait.
local function gcra_decide(key, P, L, C, T, n, now)
  local stored = get1(key)
  local tolerance = C * T
  -- After any admission TAT <= then + B*T, so a now before TAT - B*T means the
  -- clock ran backwards: take the earliest instant the state allows.
  now = math.max(now, stored - tolerance)
  local tat = math.max(stored, now)
  local wait = tat - now
  local allowed, retry = false, 0
  if wait + n * T <= tolerance then
    tat = tat + n * T
    allowed = true
  else
    retry = wait + n * T - tolerance
  end
  local remaining = tdiv(tolerance - (tat - now), T)
  if tat <= now then
    return allowed, remaining, retry, 0, wait
  end
  local w
  if allowed and n > 0 then
    w = enc1(tat)
  end
  return allowed, remaining, retry, tat - now, wait, w, tat, tat, now
end

-- gcra_refund moves TAT back by n*T. If nobody else was admitted since (TAT
-- is still ref1, what the admission at ref2 set) that is exact. Otherwise
-- the others may have found the bucket full had this admission not been made
-- and lost the refill in between (at most now - ref2): that much is kept, so
-- a refund never makes the bucket fuller than it would be without it.
local function gcra_refund(key, P, L, C, T, n, tat1, t0, now)
  local tat = get1(key)
  if tat == 0 then
    return
  end
  local back = n * T
  if tat ~= tat1 then
    back = math.max(0, back - math.max(0, now - t0))
  end
  tat = tat - back
  if tat <= now then
    redis.call('DEL', key)
  else
    put(key, enc1(tat), tat)
  end
end

ALG.gc = {
  decide = function(key, P, L, C, T, n, now)
    local allowed, remaining, retry, reset, _, w, reset_at, r1, r2 = gcra_decide(key, P, L, C, T, n, now)
    return allowed, remaining, retry, reset, 0, w, reset_at, r1, r2
  end,
  commit = put,
  refund = gcra_refund,
}
