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
    return (struct.unpack('<xd', v)), 0
  end
  local tat, tol = struct.unpack('<xdd', v)
  return tat, tol
end

local function gcra_decide(key, P, L, C, T, n, now)
  local stored, kept = gcra_get(key)
  local tolerance = C * T
  if kept == 0 then
    kept = tolerance
  end
  -- After any admission TAT <= then + TOL, so a now before TAT - TOL means the
  -- clock ran backwards: take the earliest instant the state allows. TOL is
  -- the admitting policy's, so a bucket that shrank since is not mistaken for
  -- a clock step.
  now = math.max(now, stored - kept)
  local tat = math.max(stored, now)
  local wait = tat - now
  local allowed, retry = false, 0
  if n == 0 or wait + n * T <= tolerance then -- a peek is allowed past a shrunk bucket
    tat = tat + n * T
    allowed = true
  else
    retry = wait + n * T - tolerance
  end
  local remaining = tdiv(math.max(0, tolerance - (tat - now)), T)
  if tat <= now then
    return allowed, remaining, retry, 0, wait
  end
  local w
  if allowed and n > 0 then
    w = enc2(tat, tolerance)
  end
  return allowed, remaining, retry, tat - now, wait, w, tat, tat, now
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
  decide = function(key, P, L, C, T, n, now)
    local allowed, remaining, retry, reset, _, w, reset_at, r1, r2 = gcra_decide(key, P, L, C, T, n, now)
    return allowed, remaining, retry, reset, 0, w, reset_at, r1, r2
  end,
  commit = put,
  refund = gcra_refund,
}
