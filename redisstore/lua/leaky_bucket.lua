-- Leaky bucket as a shaper (sluice/leaky_bucket.go): GCRA's admission (needs
-- gcra.lua), plus Delay, the admitted request's wait in the queue.
ALG.lb = {
  decide = function(key, P, L, C, T, n, now)
    local allowed, remaining, retry, reset, wait, w, reset_at, r1, r2 = gcra_decide(key, P, L, C, T, n, now)
    if not allowed or n == 0 then
      wait = 0 -- a peek admits nothing, so nothing waits
    end
    return allowed, remaining, retry, reset, wait, w, reset_at, r1, r2
  end,
  commit = put,
  refund = gcra_refund,
}
