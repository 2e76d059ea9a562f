package observe

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/share"
	"github.com/sluicehq/sluice/memory"
	"github.com/sluicehq/sluice/storetest"
)

// The fair-share metrics say, per policy, how many tenants have a share and
// the water level: with a limit of 100, a tenant asking 300 and one asking
// 10, two tenants and a level of 90.
func TestSharesMetrics(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch)
	s := share.New(memory.New(memory.WithClock(clock)), share.WithClock(clock))
	o := New("test", slog.New(slog.DiscardHandler), nil)
	o.WatchShares(s)
	p := &sluice.Policy{Name: "backend", Algorithm: sluice.GCRA, Limit: 100, Period: time.Second}
	for tenant, n := range map[string]int{"heavy": 300, "light": 10} {
		for range n {
			s.Limit(p, time.Second, tenant, 1, 1)
		}
	}
	clock.Advance(time.Second)
	s.Recompute()
	want := `
# HELP sluice_fair_share_level The limit, in units per period of a fair-share policy, of a tenant of weight 1 not yet on the board: while some tenants ask for more than they get, the water level every one of them is limited to per unit of weight; otherwise an equal part of the limit.
# TYPE sluice_fair_share_level gauge
sluice_fair_share_level{policy="backend"} 90
# HELP sluice_fair_share_tenants Tenants of a fair-share policy (share: fair) with a share: those asking, on any node, as of the last recomputation of the shares.
# TYPE sluice_fair_share_tenants gauge
sluice_fair_share_tenants{policy="backend"} 2
`
	if err := testutil.GatherAndCompare(o.Registry(), strings.NewReader(want), "sluice_fair_share_tenants", "sluice_fair_share_level"); err != nil {
		t.Fatal(err)
	}
}
