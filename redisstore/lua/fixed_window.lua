-- Fixed window (sluice/fixed_window.go). State (last, count): the instant of
-- the last admission and the units admitted in its window.
ALG.fw = {
  decide = function(key, P, L, C, T, n, now)
    local last, cnt = get2(key)
    if now < last then
      now = last -- time ran backwards: no time has passed
    end
    local start = tdiv(now, P) * P
    local count = 0
    if last >= start then
      count = cnt
    end
    local allowed, retry = false, 0
    if n == 0 or count + n <= L then -- a peek is allowed over a lowered limit
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
