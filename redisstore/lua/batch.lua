-- all_or_nothing decides k requests on keys[k0..k0+k-1], whose code, P, L,
-- C, T, n are argv[b..b+6k-1], all or nothing, and puts their replies in out
-- after index o. Every request is decided before anything is written. If all
-- are admitted, all are written; otherwise nothing is, and every key reports
-- its state as a peek sees it, denied, with the largest retry_after among
-- the denials.
local function all_or_nothing(keys, k0, k, argv, b, out, o)
  local algs, params, writes, resets = {}, {}, {}, {}
  local ok, wait = true, 0
  for i = 1, k do
    local a = b + (i - 1) * 6
    local alg = ALG[argv[a]]
    local p = { tonumber(argv[a + 1]), tonumber(argv[a + 2]), tonumber(argv[a + 3]), tonumber(argv[a + 4]), tonumber(argv[a + 5]) }
    local allowed, remaining, retry, reset, delay, w, reset_at = alg.decide(keys[k0 + i - 1], p[1], p[2], p[3], p[4], p[5], NOW)
    local oi = o + (i - 1) * 5
    out[oi + 1], out[oi + 2], out[oi + 3], out[oi + 4], out[oi + 5] = allowed and 1 or 0, remaining, retry, reset, delay
    algs[i], params[i], writes[i], resets[i] = alg, p, w or false, reset_at
    if not allowed then
      ok = false
      wait = math.max(wait, retry)
    end
  end
  for i = 1, k do
    local key = keys[k0 + i - 1]
    if ok then
      if writes[i] then
        algs[i].commit(key, writes[i], resets[i])
      end
    else
      local p, oi = params[i], o + (i - 1) * 5
      local _, remaining, _, reset, delay = algs[i].decide(key, p[1], p[2], p[3], p[4], 0, NOW)
      out[oi + 1], out[oi + 2], out[oi + 3], out[oi + 4], out[oi + 5] = 0, remaining, wait, reset, delay
    end
  end
end

-- PACK holds struct formats of n doubles by n: in the function library it
-- outlives a call, which then builds no format string.
local PACK = {}

local function pack_format(n)
  local f = PACK[n]
  if not f then
    f = '<' .. string.rep('d', n)
    PACK[n] = f
  end
  return f
end

-- OUT is decide_batch's reply before packing. In the function library it
-- outlives a call, so a call fills slots that exist instead of growing a new
-- table (each growth rehashes what it holds, which cost more than the
-- decisions' arithmetic); values past a call's count are stale and unread.
-- A table grown past OUT_MAX by a large DecideAll set is let go.
local OUT, OUT_MAX = {}, 1024

-- pack_doubles packs out[1..o] as little-endian doubles, in chunks: unpack
-- of a very long list would overflow Lua's stack.
local function pack_doubles(out, o)
  if o <= 1000 then
    return struct.pack(pack_format(o), unpack(out, 1, o))
  end
  local parts = {}
  for s = 1, o, 1000 do
    local e = math.min(o, s + 999)
    parts[#parts + 1] = struct.pack(pack_format(e - s + 1), unpack(out, s, e))
  end
  return table.concat(parts)
end

-- decide_batch: every decision queued for one node while its previous call
-- was in flight (coalesce.go), at one instant, in order. Records follow now
-- ('' = server TIME) in argv, each on the next keys:
--   code, P, L, C, T, c, n1..nc  c requests of that policy on one key, each
--                                with its cost, in order: each gets what it
--                                would have got alone in that order; a c of
--                                -n or 0 (no n follow) is one request of
--                                cost n: one argument less for the most
--                                common run;
--   c, n1..nc                    the same with the previous record's policy;
--   [code, P, L, C, T,] 'm', k, n
--                                k lone requests of cost n, one on each of
--                                the next k keys, under that policy (or the
--                                previous record's): the most common batch,
--                                many keys asked for once, in three
--                                arguments instead of one per key;
--   'a', k, then k times code, P, L, C, T, n
--                                all or nothing over k keys, as DecideAll;
--   [code, P, L, C, T,] 'u', n, m
--                                a reservation of n to m units (reserve.lua)
--                                under that policy (or the previous
--                                record's), replying granted, remaining,
--                                retry_after, reset_after, delay, ref1, ref2:
--                                three arguments where the policy repeats;
--   'h', code, P, L, C, T, n     one request decided and written as a lone
--                                Decide is, replying its ref1, ref2 too (a
--                                reservation of a set whose keys are on
--                                several nodes, crossslot.go);
--   'r', code, P, L, C, T, n, ref1, ref2
--                                a refund of n units admitted with ref1,
--                                ref2 (main.lua's mode 'r'), replying nothing;
--   'd', code, P, L, C, T, n     a dry run (header.lua's dry_run, main.lua's
--                                mode 'd'): one request decided without
--                                writing, the key reported as a peek sees
--                                it (a spread set's first step, crossslot.go).
-- A run of several requests on one key reads its string state once and
-- writes it once, after the last (HOLD; the sliding log's list excepted); the
-- string states of all the keys are read with one MGET first.
-- Reply: allowed, remaining, retry_after, reset_after, delay per request (a
-- reservation's and a held request's seven, a refund's none), in order, as
-- packed doubles.
local function decide_batch(keys, argv)
  init(argv[1])
  if #keys > 1 and #keys <= 128 then -- a large DecideAll set alone reads key by key
    prefetch(keys)
  end
  local out, o, ki, i = OUT, 0, 1, 2
  local alg, P, L, C, T
  while i <= #argv do
    local tok = argv[i]
    if tok == 'a' then
      local k = tonumber(argv[i + 1])
      all_or_nothing(keys, ki, k, argv, i + 2, out, o)
      ki, i, o = ki + k, i + 2 + 6 * k, o + 5 * k
    elseif tok == 'u' then
      out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5], out[o + 6], out[o + 7] = reserve_held(alg, keys[ki], P, L, C, T,
        tonumber(argv[i + 1]), tonumber(argv[i + 2]))
      ki, i, o = ki + 1, i + 3, o + 7
    elseif tok == 'h' then
      local alg, key = ALG[argv[i + 1]], keys[ki]
      local allowed, remaining, retry, reset, delay, w, reset_at, r1, r2 = alg.decide(key, tonumber(argv[i + 2]), tonumber(argv[i + 3]),
        tonumber(argv[i + 4]), tonumber(argv[i + 5]), tonumber(argv[i + 6]), NOW)
      if w then
        alg.commit(key, w, reset_at)
      end
      out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5], out[o + 6], out[o + 7] = allowed and 1 or 0, remaining, retry, reset, delay, r1 or 0, r2 or 0
      ki, i, o = ki + 1, i + 7, o + 7
    elseif tok == 'r' then
      ALG[argv[i + 1]].refund(keys[ki], tonumber(argv[i + 2]), tonumber(argv[i + 3]), tonumber(argv[i + 4]), tonumber(argv[i + 5]),
        tonumber(argv[i + 6]), tonumber(argv[i + 7]), tonumber(argv[i + 8]), NOW)
      ki, i = ki + 1, i + 9
    elseif tok == 'd' then
      out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5] = dry_run(ALG[argv[i + 1]], keys[ki], tonumber(argv[i + 2]),
        tonumber(argv[i + 3]), tonumber(argv[i + 4]), tonumber(argv[i + 5]), tonumber(argv[i + 6]))
      ki, i, o = ki + 1, i + 7, o + 5
    elseif tok == 'm' then
      local n, decide, commit = tonumber(argv[i + 2]), alg.decide, alg.commit
      for _ = 1, tonumber(argv[i + 1]) do
        local key = keys[ki]
        local allowed, remaining, retry, reset, delay, w, reset_at = decide(key, P, L, C, T, n, NOW)
        if w then
          commit(key, w, reset_at)
        end
        out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5] = allowed and 1 or 0, remaining, retry, reset, delay
        ki, o = ki + 1, o + 5
      end
      i = i + 3
    elseif ALG[tok] and (argv[i + 5] == 'm' or argv[i + 5] == 'u') then -- a policy for the record after it
      alg, P, L, C, T = ALG[tok], tonumber(argv[i + 1]), tonumber(argv[i + 2]), tonumber(argv[i + 3]), tonumber(argv[i + 4])
      i = i + 5
    else
      local c = tonumber(tok)
      if not c then
        alg, P, L, C, T = ALG[tok], tonumber(argv[i + 1]), tonumber(argv[i + 2]), tonumber(argv[i + 3]), tonumber(argv[i + 4])
        c = tonumber(argv[i + 5])
        i = i + 5
      end
      -- A lone request's cost is its token; several read and write the
      -- key once (HOLD).
      local key, from, to, cost = keys[ki], i + 1, i + c, nil
      if c <= 0 then
        from, to, cost = i, i, 0 - c
      end
      HOLD = c > 1
      for j = from, to do
        local allowed, remaining, retry, reset, delay, w, reset_at = alg.decide(key, P, L, C, T, cost or tonumber(argv[j]), NOW)
        if w then
          alg.commit(key, w, reset_at)
        end
        out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5] = allowed and 1 or 0, remaining, retry, reset, delay
        o = o + 5
      end
      if HOLD then
        release(key)
      end
      ki, i = ki + 1, to + 1
    end
  end
  if o > OUT_MAX then
    OUT = {}
  end
  return pack_doubles(out, o)
end
