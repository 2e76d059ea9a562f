-- Tells a node what changed since the state it holds (see change.lua for the
-- keys): {'same'} when nothing did; else {kind, epoch, version, head, field,
-- value, ...}: kind 'delta' lists the fields changed since, with their value
-- now (nil: removed); kinds 'full' and 'diverged' list every override. A
-- delta needs the same epoch, a higher version and, in the log at the node's
-- version, the node's head: else Redis lost data, went back in time (a
-- replica promoted), or the log no longer reaches back, and the node reads
-- everything ('diverged': the log reaches back, to another change).
-- KEYS[1] the overrides hash, KEYS[2] the change log.
-- ARGV: the node's epoch ('' for none), version and head; the most changes
-- sent as a delta (less than the log's length).
local m = redis.call('HMGET', KEYS[1], '!epoch', '!version', '!head')
local epoch, version, head = m[1] or '', tonumber(m[2]) or 0, m[3] or ''
local held = tonumber(ARGV[2])
if epoch == ARGV[1] and version == held and head == ARGV[3] then
  return {'same'}
end

local out = {'full', epoch, version, head}
local n = version - held
if epoch == ARGV[1] and epoch ~= '' and n > 0 and n <= tonumber(ARGV[4]) then
  local log = redis.call('LRANGE', KEYS[2], 0, n)
  if #log == n + 1 and string.sub(log[n + 1], 1, 16) ~= ARGV[3] then
    out[1] = 'diverged'
  elseif #log == n + 1 then
    out[1] = 'delta'
    local seen = {}
    for i = n, 1, -1 do
      local f = string.sub(log[i], 17)
      if not seen[f] then
        seen[f] = true
        out[#out + 1] = f
        out[#out + 1] = redis.call('HGET', KEYS[1], f)
      end
    end
    return out
  end
end
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  if string.sub(all[i], 1, 1) ~= '!' then
    out[#out + 1] = all[i]
    out[#out + 1] = all[i + 1]
  end
end
return out
