-- A charge on a leaky bucket is GCRA's (needs charge_gcra.lua): the request
-- is over, so nothing waits in the queue, but the queue's tail moves.
ALG.lb.charge = gcra_charge
