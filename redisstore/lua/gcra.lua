-- GCRA (sluice/gcra.go). State (tat, tol): the theoretical arrival time and
-- the tolerance B*T of the policy that admitted last. A state written before
-- TOL was kept (a bare TAT, text or packed) reads as TOL 0: the current
-- policy's. gcra_decide also serves the leaky bucket, which reports the wait.
local function gcra_get(key)
  local v = read(key)
  if not v then
    return 0, 0
  elseif string.byte(v) ~= 0 then
    local tat, tol = string.match(v, '^(-?%d+):?(%d*)$')
    return tonumber(tat), tonumber(tol) or 0
  elseif #v == 9 then
    return (SUNPACK('<xd', v)), 0
  end
  local tat, tol = SUNPACK('<xdd', v)
  return tat, tol
end

-- gcra_at reads key at now: the stored TAT, the tolerance C * T, and the
-- instant the decision runs at. After any admission TAT <= then + TOL, so a
-- now before TAT - TOL means the clock ran backwards: take the earliest
-- instant the state allows. TOL is the admitting policy's (or a charge's
-- TAT - then, when larger), so a bucket that shrank since, or a key that
-- owes, is not mistaken for a clock step.
local function gcra_at(key, C, T, now)
  local stored, kept = gcra_get(key)
  local tolerance = C * T
  if kept == 0 then
    kept = tolerance
  end
  local earliest = stored - kept
  return stored, tolerance, earliest > now and earliest or now
end

-- gcra_decide is ALG.gc.decide, called directly (a wrapper's call costs
-- more than its work). With shaper set (the leaky bucket) the delay it
-- reports is the admitted request's wait; GCRA's is 0.
local function gcra_decide(key, P, L, C, T, n, now, shaper)
  local stored, tolerance
  stored, tolerance, now = gcra_at(key, C, T, now)
  local tat = stored > now and stored or now
  local wait = tat - now
  local allowed, retry = false, 0
  local ask = (n > 0 and n or 1) * T -- a peek asks for one unit's room
  if wait + ask <= tolerance then
    tat = tat + n * T
    allowed = true
  else
    retry = wait + ask - tolerance
  end
  local delay = 0
  if shaper and allowed and n > 0 then
    delay = wait -- a peek admits nothing, so nothing waits
  end
  local room = tolerance - (tat - now)
  local remaining = room > 0 and tdiv(room, T) or 0
  if tat <= now then
    return allowed, remaining, retry, 0, delay
  end
  local w
  if allowed and n > 0 then
    w = enc2(tat, tolerance)
  end
  return allowed, remaining, retry, tat - now, delay, w, tat, tat, now
end

-- gcra_refund moves TAT back by n*T. If nobody else was admitted since (TAT
-- is still ref1, what the admission at ref2 set) that is exact. Otherwise
-- the others may have found the bucket full had this admission not been made
-- and lost the refill in between (at most now - ref2): that much is kept, so
-- a refund never makes the bucket fuller than it would be without it.
local function gcra_refund(key, P, L, C, T, n, tat1, t0, now)
  local tat, tol = gcra_get(key)
  if tat == 0 then
    return
  end
  local back = n * T
  if tat ~= tat1 then
    back = math.max(0, back - math.max(0, now - t0))
  end
  tat = tat - back
  if tat <= now then
    del(key)
  else
    put(key, enc2(tat, tol), tat)
  end
end

ALG.gc = {
  decide = gcra_decide,
  commit = put,
  refund = gcra_refund,
}
