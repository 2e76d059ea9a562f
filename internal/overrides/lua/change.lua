-- Sets or removes one override, drops a few expired ones, and records each
-- field it changed in the change log; returns the new version (0: a removal
-- of an override that was not in force; -1, -2: a bound refused a new one).
--
-- KEYS[1] the overrides hash: a field per override ("<policy> <target>" ->
--   20-digit expiry, or '~' * 20 for none, then JSON) and the fields
--   !epoch (the history's id), !version (changes in that history) and !head
--   (the last change's id). Losing the hash loses its epoch with it, so the
--   nodes see a new history and read it whole.
-- KEYS[2] the index: a zset of "<policy> <expiry> <target>" at score 0, to
--   count a policy's overrides and its expired ones by lexical range.
-- KEYS[3] the expiries: a zset of fields by expiry (µs), those with one.
-- KEYS[4] the change log: a list of "<change id><field>", newest first.
-- Both zsets hold the member "!<epoch>" (score +inf): one without it was
-- lost or belongs to an older history, and is rebuilt from the hash.
-- ARGV: op ('set' or 'del'), policy, target, value ('set'), now (20-digit
-- µs), id (16 characters: this change's, and the epoch when a new history
-- starts), max per policy, max total, most expired dropped per call, log
-- length, channel.
local hash, index, expiries, log = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local op, policy, target, value, now, id = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local field = policy .. ' ' .. target

-- entry is the index member of field f whose value's expiry is exp.
local function entry(f, exp)
  local sp = string.find(f, ' ', 1, true)
  return string.sub(f, 1, sp) .. exp .. string.sub(f, sp)
end

local meta = redis.call('HMGET', hash, '!epoch', '!version')
local epoch, version = meta[1], tonumber(meta[2])
if not epoch or not version then
  epoch, version = id, 0
  redis.call('HSET', hash, '!epoch', epoch, '!version', 0, '!head', id)
  redis.call('DEL', log)
end

local mark = '!' .. epoch
if not redis.call('ZSCORE', index, mark) or not redis.call('ZSCORE', expiries, mark) then
  redis.call('DEL', index, expiries)
  redis.call('ZADD', index, 0, mark)
  redis.call('ZADD', expiries, '+inf', mark)
  local all = redis.call('HGETALL', hash)
  for i = 1, #all, 2 do
    local f, exp = all[i], string.sub(all[i + 1], 1, 20)
    if string.sub(f, 1, 1) ~= '!' and string.find(f, ' ', 1, true) then
      redis.call('ZADD', index, 0, entry(f, exp))
      if tonumber(exp) then
        redis.call('ZADD', expiries, exp, f)
      end
    end
  end
end

-- forget removes field f, whose value is v, from the hash and the indexes.
local function forget(f, v)
  redis.call('HDEL', hash, f)
  redis.call('ZREM', index, entry(f, string.sub(v, 1, 20)))
  redis.call('ZREM', expiries, f)
end

local nowUS = tonumber(now)
local function inForce(v)
  local e = tonumber(string.sub(v, 1, 20))
  return not e or e > nowUS
end

local old = redis.call('HGET', hash, field)
local changed = {field}
local found = true
if op == 'set' then
  if not old or not inForce(old) then
    -- One more in force: expired ones do not count against the bounds.
    local lo = '[' .. policy .. ' '
    local n = redis.call('ZLEXCOUNT', index, lo, '(' .. policy .. '!')
      - redis.call('ZLEXCOUNT', index, lo, '(' .. policy .. ' ' .. now .. '!')
    if n >= tonumber(ARGV[7]) then
      return -1
    end
    local total = redis.call('HLEN', hash) - 3 - redis.call('ZCOUNT', expiries, '-inf', now)
    if total >= tonumber(ARGV[8]) then
      return -2
    end
  end
  if old then
    forget(field, old)
  end
  local exp = string.sub(value, 1, 20)
  redis.call('HSET', hash, field, value)
  redis.call('ZADD', index, 0, entry(field, exp))
  if tonumber(exp) then
    redis.call('ZADD', expiries, exp, field)
  end
else
  if not old then
    return 0
  end
  found = inForce(old)
  forget(field, old)
end

-- Drop a few expired overrides, soonest expired first, so that they do not
-- pile up; the nodes hear of it as of any change.
for _, f in ipairs(redis.call('ZRANGEBYSCORE', expiries, '-inf', now, 'LIMIT', 0, tonumber(ARGV[9]))) do
  local v = redis.call('HGET', hash, f)
  if v then
    forget(f, v)
  else
    redis.call('ZREM', expiries, f)
  end
  changed[#changed + 1] = f
end

for _, f in ipairs(changed) do
  version = version + 1
  redis.call('LPUSH', log, id .. f)
end
redis.call('LTRIM', log, 0, tonumber(ARGV[10]) - 1)
redis.call('HSET', hash, '!version', version, '!head', id)
redis.call('PUBLISH', ARGV[11], version)
if not found then
  return 0
end
return version
