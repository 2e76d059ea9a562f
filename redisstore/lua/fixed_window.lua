-- Fixed window (sluice/fixed_window.go). State (last, count): the instant of
-- the last admission and the units admitted in its window.

-- fw_at reads key at now: the instant the decision runs at (never before
-- the last admission: a clock that ran backwards means no time has passed),
-- its window's start and the units counted in that window.
local function fw_at(key, P, now)
  local last, cnt = get2(key)
  if now < last then
    now = last
  end
  local start = tdiv(now, P) * P
  if last >= start then
    return now, start, cnt
  end
  return now, start, 0
end

ALG.fw = {
  decide = function(key, P, L, C, T, n, now)
    local start, count
    now, start, count = fw_at(key, P, now)
    local allowed, retry = false, 0
    local ask = n > 0 and n or 1 -- a peek is allowed when one unit would be
    if count + ask <= L then
      count = count + n
      allowed = true
    else
      retry = start + P - now
    end
    if count == 0 then
      return allowed, math.max(0, L - count), retry, 0, 0
    end
    local w
    if allowed and n > 0 then
      w = enc2(now, count)
    end
    return allowed, math.max(0, L - count), retry, start + P - now, 0, w, start + P, start, 0
  end,

  commit = put,

  -- refund gives back n units counted in the window starting at ref1; once
  -- that window is over there is nothing left to give back.
  refund = function(key, P, L, C, T, n, start, _, now)
    local last, cnt = get2(key)
    if cnt == 0 or tdiv(last, P) * P ~= start then
      return
    end
    cnt = cnt - n
    if cnt <= 0 or start + P <= now then
      del(key)
    else
      put(key, enc2(last, cnt), start + P)
    end
  end,
}
