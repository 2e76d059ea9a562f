-- A prototype of another state layout, for BenchmarkStateLayout only: the
-- states of a batch's keys are fields of one hash, read with one HMGET and
-- written with one HSET, instead of a string key each. It replaces
-- header.lua's read and put for gcra.lua, which follows it. It does not
-- expire single fields (Redis 7.0 cannot): a store built this way would
-- have to sweep fields idle past their reset itself.
local HPEND, HNP, HMAX = {}, 0, 0

local function read(key)
  return FETCHED[key]
end

local function put(key, value, reset_at)
  HNP = HNP + 1
  HPEND[2 * HNP - 1], HPEND[2 * HNP] = key, value
  if reset_at > HMAX then
    HMAX = reset_at
  end
end
