-- Sliding log (sluice/sliding_log.go). State: a list of the admitted entries,
-- oldest first, each (ts, cost, cum) packed as enc3 does, where cum is the
-- running total of every cost pushed so far (the newest entry's included). Differences of cum give
-- the sum of any run of entries, so a decision reads O(log n) entries instead
-- of the whole log, and the list is all the state there is.

-- sl_parse reads an entry: packed, or the text "ts:cost:cum" of an earlier
-- version of Sluice.
local function sl_parse(v)
  if string.byte(v) ~= 0 then
    local ts, cost, cum = string.match(v, '^(-?%d+):(%d+):(%d+)$')
    return tonumber(ts), tonumber(cost), tonumber(cum)
  end
  return struct.unpack('<xddd', v)
end

local function sl_at(key, i)
  return sl_parse(redis.call('LINDEX', key, i))
end

-- sl_first returns the smallest index in [lo, hi] whose entry has a ts (by
-- cum false) or a cum of at least bound, given that hi's does; both grow
-- along the list.
local function sl_first(key, lo, hi, by_cum, bound)
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    local ts, _, cum = sl_at(key, mid)
    if by_cum then
      ts = cum
    end
    if ts >= bound then
      hi = mid
    else
      lo = mid + 1
    end
  end
  return lo
end

-- sl_live reads the log at now: its length; first, the oldest live entry
-- (len if none); cum, the newest entry's running total; sum, the live
-- entries' costs; newest, its time while it is live; and now, which does not
-- run backwards past the newest entry.
local function sl_live(key, P, now)
  local len = redis.call('LLEN', key)
  local first, cum, sum, newest = len, 0, 0, nil
  if len > 0 then
    local ts, _, c = sl_at(key, -1)
    if now < ts then
      now = ts -- time ran backwards: no time has passed
    end
    cum = c
    local horizon = now - P -- entries at or before it have left the period
    if ts > horizon then
      newest = ts
      first = sl_first(key, 0, len - 1, false, horizon + 1) -- integers: ts > horizon
      local _, fcost, fcum = sl_at(key, first)
      sum = c - (fcum - fcost)
    end
  end
  return len, first, cum, sum, newest, now
end

ALG.sl = {
  decide = function(key, P, L, C, T, n, now)
    local len, first, cum, sum, newest
    len, first, cum, sum, newest, now = sl_live(key, P, now)
    local base = cum - sum -- running total before the oldest live entry
    local allowed, retry, w = false, 0, nil
    local ask = n > 0 and n or 1 -- a peek is allowed when one unit would be
    if sum + ask <= L then
      allowed = true
      if n > 0 then
        sum, cum, newest = sum + n, cum + n, now
        w = { first, len, enc3(now, n, cum) }
      end
    else
      -- Entries leave oldest first: wait for the first whose departure frees
      -- enough, the oldest live entry with cum - base >= sum + n - L.
      local need = base + sum + ask - L
      local i = sl_first(key, first, len - 1, true, need)
      retry = sl_at(key, i) + P - now
    end
    if not newest then
      return allowed, math.max(0, L - sum), retry, 0, 0
    end
    return allowed, math.max(0, L - sum), retry, newest + P - now, 0, w, newest + P, now, cum
  end,

  -- commit drops the entries that left the period and appends the new one.
  commit = function(key, w, reset_at)
    local first, len = w[1], w[2]
    if first >= len and len > 0 then
      redis.call('DEL', key)
    elseif first > 0 then
      redis.call('LTRIM', key, first, -1)
    end
    redis.call('RPUSH', key, w[3])
    keep(key, reset_at)
  end,

  -- refund removes the entry admitted at ref1 with running total ref2. The
  -- entries pushed after it carry its cost in their running totals: take it
  -- out. Its own running total is ref2 no more once an entry before it was
  -- refunded (two sets racing on one key, the first refunded first), so it is
  -- found by its time and cost: entries of one time and cost are
  -- interchangeable, as they leave the period together.
  refund = function(key, P, L, C, T, n, ts, cum, now)
    local len = redis.call('LLEN', key)
    local i = len - 1
    while i >= 0 do
      local ets, ecost = sl_at(key, i)
      if ets < ts then
        return -- older than the entry: it has already left
      end
      if ets == ts and ecost == n then
        break
      end
      i = i - 1
    end
    if i < 0 then
      return
    end
    for j = i + 1, len - 1 do
      local ets, ecost, ecum = sl_at(key, j)
      redis.call('LSET', key, j, enc3(ets, ecost, ecum - n))
    end
    -- Marked, then removed: a later entry may now read the same bytes.
    redis.call('LSET', key, i, 'refunded')
    redis.call('LREM', key, 1, 'refunded')
    if len == 1 then
      return -- the list was that entry alone, and Redis deleted the empty key
    end
    local newest = sl_at(key, -1)
    if newest + P <= now then
      redis.call('DEL', key)
    else
      keep(key, newest + P)
    end
  end,
}
