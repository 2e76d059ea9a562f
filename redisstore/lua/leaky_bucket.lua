-- Leaky bucket as a shaper (sluice/leaky_bucket.go): GCRA's admission (needs
-- gcra.lua), plus Delay, the admitted request's wait in the queue.
ALG.lb = {
  decide = function(key, P, L, C, T, n, now)
    return gcra_decide(key, P, L, C, T, n, now, true)
  end,
  commit = put,
  refund = gcra_refund,
}
