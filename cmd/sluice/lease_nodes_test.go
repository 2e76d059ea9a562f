package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/loadgen"
	"github.com/sluicehq/sluice/internal/redistest"
)

// TestLeaseNodesBound: two serve nodes with leases on one Redis, loaded at
// once as `sluice bench` loads them (one hot key, then 10k keys), admit in
// total no more than the proven bound B + (τ + d)/T, lose at most one lease
// per node to under-admission, and call Redis far less often than they
// decide. on_error is closed so that only leases decide what is admitted.
func TestLeaseNodesBound(t *testing.T) {
	r := redistest.Start(t)
	// gcra 200 per hour: B = 200, T = 18s; the default lease TTL is
	// d = B·T/20 = 180s and a lease holds at most B/10 = 20 units.
	const burst, maxLease = 200, 20
	const emission, ttl = 18 * time.Second, 180 * time.Second
	native := fmt.Sprintf("store:\n  url: %q\n  on_error: closed\n  lease: {}\npolicies:\n  - {name: hot, algorithm: gcra, limit: %d, period: 1h}\n", r.URL(), burst)
	nodes := []*served{startServe(t, native), startServe(t, native)}

	bench := func(opts loadgen.Options) (loadgen.Summary, time.Duration) {
		t.Helper()
		var wg sync.WaitGroup
		sums := make([]loadgen.Summary, len(nodes))
		start := time.Now()
		for i, n := range nodes {
			target, err := loadgen.Open(n.base, loadgen.TargetConfig{Policy: "hot", Concurrency: opts.Concurrency, Timeout: 30 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer target.Close()
			o := opts
			o.Target, o.Seed = target, uint64(i+1)
			wg.Add(1)
			go func() {
				defer wg.Done()
				s, err := loadgen.Run(context.Background(), o)
				if err != nil {
					t.Error(err)
				}
				sums[i] = s
			}()
		}
		wg.Wait()
		elapsed := time.Since(start)
		var total loadgen.Summary
		for i, s := range sums {
			t.Logf("node %d: %d requests, %d allowed, %d denied, %d errors %s", i, s.Requests, s.Allowed, s.Denied, s.Errors, s.FirstError)
			total.Requests += s.Requests
			total.Allowed += s.Allowed
			total.Errors += s.Errors
		}
		return total, elapsed
	}

	hot, tau := bench(loadgen.Options{Concurrency: 8, Requests: 600, Hot: 1})
	most := int64(burst + (tau+ttl)/emission)
	t.Logf("hot key: %d admitted in %v (bound %d, at least %d)", hot.Allowed, tau, most, burst-2*maxLease)
	if hot.Allowed > most {
		t.Errorf("hot key: %d admitted by two nodes in %v, above the bound %d", hot.Allowed, tau, most)
	}
	if hot.Errors == 0 && hot.Allowed < burst-2*maxLease {
		t.Errorf("hot key: %d admitted, below %d (the burst less one lease per node)", hot.Allowed, burst-2*maxLease)
	}

	leaseCalls := func() (decisions, calls float64) {
		for _, n := range nodes {
			decisions += metric(t, n.base, "sluice_lease_decisions_total")
			calls += metric(t, n.base, "sluice_lease_store_calls_total")
		}
		return decisions, calls
	}
	hotDecisions, hotCalls := leaseCalls()
	t.Logf("hot key: %v store calls for %v decisions", hotCalls, hotDecisions)
	if hotCalls*10 > hotDecisions {
		t.Errorf("hot key: %v store calls for %v decisions, want under a tenth", hotCalls, hotDecisions)
	}

	cold, _ := bench(loadgen.Options{Concurrency: 8, Requests: 600, Keys: 10000})
	if cold.Allowed+cold.Errors != cold.Requests {
		t.Errorf("10k keys: %d of %d admitted (%d errors); each key is far below its limit", cold.Allowed, cold.Requests, cold.Errors)
	}

	decisions, calls := leaseCalls()
	t.Logf("in all: %v store calls for %v decisions", calls, decisions)
	if hot.Errors+cold.Errors == 0 && decisions != float64(hot.Requests+cold.Requests) {
		t.Errorf("%v lease decisions, want %d", decisions, hot.Requests+cold.Requests)
	}
}

// metric reads one unlabelled metric from a node's /metrics.
func metric(t *testing.T, base, name string) float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`).FindSubmatch(body)
	if m == nil {
		t.Fatalf("no %s in /metrics", name)
	}
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	return v
}
