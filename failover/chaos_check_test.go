package failover_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/failover"
)

// checkOutage checks what every outage must show: every call explained by
// the fail policy within the bound, none decided by Redis while it was
// broken, the breaker opened, and every worker decided by Redis again within
// chaosRecovery (less this process' stalls) after the cure. It logs the
// measurements.
func checkOutage(t *testing.T, m *stallMeter, mode failover.Mode, bl *breakerLog, o outage, calls []chaosCall, what string) {
	t.Helper()
	raw, active := checkCalls(t, m, mode, calls)
	broken := count(calls, within(o.faulted, o.healing))
	t.Logf("before the %s: %v", what, count(calls, func(c chaosCall) bool { return c.end.Before(o.faulting) }))
	t.Logf("while broken (%v): %v", o.healing.Sub(o.faulted).Round(time.Millisecond), broken)
	if broken.redis != 0 {
		t.Errorf("%d calls were decided by Redis after the %s and before the cure", broken.redis, what)
	}
	if at := bl.opened(o.faulting); at.IsZero() {
		t.Errorf("the breaker did not open after the %s", what)
	} else {
		t.Logf("breaker opened %v after the %s", at.Sub(o.faulting).Round(time.Millisecond), what)
	}
	first, all, ok := backToRedis(calls, o.healed, nil)
	if !ok {
		cured := func(c chaosCall) bool { return c.start.After(o.healed) }
		var after []chaosCall
		for _, c := range calls {
			if cured(c) {
				after = append(after, c)
			}
		}
		t.Errorf("some worker was never decided by Redis again after the cure (%v later: %v; first decision by Redis %v after the cure; breaker %s; failures after the cure:%s)",
			time.Since(o.healed).Round(time.Millisecond), count(after, cured), first.Sub(o.healed), bl.since(o.healed), causes(after))
		return
	}
	recovery := m.active(o.healed, all)
	t.Logf("cure took %v; after it, first decision by Redis %v, every worker's %v (%v not counting stalls); slowest call %v (%v not counting stalls); longest stall of the process %v",
		o.healed.Sub(o.healing).Round(time.Millisecond), first.Sub(o.healed).Round(time.Millisecond),
		all.Sub(o.healed).Round(time.Millisecond), recovery.Round(time.Millisecond),
		raw.Round(time.Millisecond), active.Round(time.Millisecond), m.worst().Round(time.Millisecond))
	if recovery > chaosRecovery {
		t.Errorf("decisions went back to Redis %v after the cure (%v not counting stalls), want <= %v", all.Sub(o.healed), recovery, chaosRecovery)
	}
}

// verdict checks one call against the fail policy: a call is either decided
// by Redis (no error, not degraded) or answered by the policy exactly as
// documented. It returns "" for a valid call, else what is wrong.
func verdict(mode failover.Mode, c chaosCall) string {
	if c.byRedis() {
		return ""
	}
	p := chaosPolicy
	switch mode {
	case failover.FailOpen:
		if c.err != nil {
			return fmt.Sprintf("FailOpen returned an error: %v", c.err)
		}
		if !c.res.Allowed || c.res.Limit != p.Limit || c.res.Remaining != p.Capacity()-1 {
			return fmt.Sprintf("FailOpen's degraded result %+v is not an uncounted admission", c.res)
		}
	case failover.FailClosed:
		var ue *failover.UnavailableError
		switch {
		case c.err == nil:
			return fmt.Sprintf("FailClosed returned a degraded result without an error: %+v", c.res)
		case !errors.Is(c.err, failover.ErrUnavailable) || !errors.As(c.err, &ue) || ue.Cause == nil:
			return fmt.Sprintf("FailClosed returned %T %q, want an *UnavailableError wrapping ErrUnavailable and a cause", c.err, c.err)
		case c.res != (sluice.Result{}):
			return fmt.Sprintf("FailClosed returned a result %+v with its error", c.res)
		}
	case failover.FailLocal:
		if c.err != nil {
			return fmt.Sprintf("FailLocal returned an error: %v", c.err)
		}
		if c.res.Limit != p.Limit {
			return fmt.Sprintf("FailLocal's local result %+v has the wrong limit", c.res)
		}
	}
	return ""
}
