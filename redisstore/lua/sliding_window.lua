-- Sliding window counter (sluice/sliding_window.go). State (last, cur, prev):
-- the instant of the last admission, the units of its window and those of
-- the window before.
local function sw_retry(P, L, e, cur, prev, n)
  if cur + n <= L and prev > 0 then
    local at = P - tdiv((L - cur - n) * P, prev)
    if at < P then
      return at - e
    end
  end
  local wait = P - e -- until the next window opens
  if cur == 0 then
    return wait
  end
  return wait + math.max(0, P - tdiv((L - n) * P, cur))
end

-- sw_expiry is when a state whose window starts at start is initial: cur
-- leaves the sliding period two windows after start, prev one window after.
local function sw_expiry(P, start, cur, prev)
  if cur > 0 then
    return start + 2 * P
  elseif prev > 0 then
    return start + P
  end
  return nil
end

-- sw_at reads key at now: the instant the decision runs at (never before
-- the last admission: a clock that ran backwards means no time has passed),
-- its window's start, and the units of that window and of the one before.
local function sw_at(key, P, now)
  local last, scur, sprev = get3(key)
  if now < last then
    now = last
  end
  local start = tdiv(now, P) * P
  local window = tdiv(last, P) * P -- the stored counts' window
  if window == start then
    return now, start, scur, sprev
  elseif window == start - P then
    return now, start, 0, scur
  end
  return now, start, 0, 0
end

ALG.sw = {
  decide = function(key, P, L, C, T, n, now)
    local start, cur, prev
    now, start, cur, prev = sw_at(key, P, now)
    local e = now - start
    local allowed, retry = false, 0
    local ask = n > 0 and n or 1 -- a peek is allowed when one unit would be
    if cur + ask <= L and prev * (P - e) <= (L - cur - ask) * P then
      cur = cur + n
      allowed = true
    else
      retry = sw_retry(P, L, e, cur, prev, ask)
    end
    -- Remaining: the largest m with prev*(P-e) + (cur+m)*P <= L*P.
    local weight = prev * (P - e)
    local q = tdiv(weight, P)
    if q * P < weight then
      q = q + 1 -- ceil, without adding P-1 to a number that may be near 2^53
    end
    local remaining = math.max(0, L - cur - q)
    local reset_at = sw_expiry(P, start, cur, prev)
    if not reset_at then
      return allowed, remaining, retry, 0, 0
    end
    local w
    if allowed and n > 0 then
      w = enc3(now, cur, prev)
    end
    return allowed, remaining, retry, reset_at - now, 0, w, reset_at, start, 0
  end,

  commit = put,

  -- refund gives back n units counted in the window starting at ref1: still
  -- cur if no later window has been written, prev if the next one has.
  refund = function(key, P, L, C, T, n, start, _, now)
    local last, cur, prev = get3(key)
    local window = tdiv(last, P) * P
    if cur + prev == 0 then
      return
    elseif window == start then
      cur = math.max(0, cur - n)
    elseif window == start + P then
      prev = math.max(0, prev - n)
    else
      return
    end
    local reset_at = sw_expiry(P, window, cur, prev)
    if not reset_at or reset_at <= now then
      redis.call('DEL', key)
    else
      put(key, enc3(last, cur, prev), reset_at)
    end
  end,
}
