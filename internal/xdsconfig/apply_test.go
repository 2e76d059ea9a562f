package xdsconfig_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/envoyrls"
	"github.com/sluicehq/sluice/internal/httpapi"
	"github.com/sluicehq/sluice/internal/service"
	"github.com/sluicehq/sluice/internal/storestack"
	"github.com/sluicehq/sluice/internal/testwait"
	"github.com/sluicehq/sluice/internal/xdsconfig"
	"github.com/sluicehq/sluice/internal/xdstest"
	"github.com/sluicehq/sluice/memory"
)

// TestVersionOverBoundsNACKed: a version past the descriptor bound is NACKed
// with the bound and the number of descriptors it has; the configuration in
// force stays and decisions go on counting under it.
func TestVersionOverBoundsNACKed(t *testing.T) {
	cp := xdstest.Start(t, "127.0.0.1:0")
	cp.Set("v1", xdstest.Domain("edge", "user", "", 3))
	n := startNodeWithin(t, cp.Addr, xdsconfig.Limits{Descriptors: 1000})
	testwait.Until(t, "v1 applied", func() bool { return n.limitOf("edge", "user", "alice") == 3 })
	n.expect("edge", "user", "alice", ok)
	before := n.svc.Config()

	big := flat("edge", 5000)
	big.Descriptors[0].Value = "" // user with any value: 1 a minute, were it applied
	cp.Set("v2", big)
	var nack *discovery.DiscoveryRequest
	testwait.Until(t, "the NACK of v2", func() bool {
		nack = cp.Seen(func(r *discovery.DiscoveryRequest) bool { return r.GetErrorDetail() != nil })
		return nack != nil
	})
	if msg := nack.GetErrorDetail().GetMessage(); !strings.Contains(msg, "the version has 5000 descriptors, over the bound of 1000 (--max-descriptors)") {
		t.Errorf("NACK reason %q does not name the bound and the value", msg)
	}
	if nack.GetVersionInfo() != "v1" {
		t.Errorf("NACK with version %q, want v1's", nack.GetVersionInfo())
	}
	if n.svc.Config() != before {
		t.Fatal("a version past the bound changed the configuration in force")
	}
	n.expect("edge", "user", "alice", ok, ok, over) // still 3 a minute, counted across
	if got := n.metric("sluice_xds_updates_total", "rejected"); got < 1 {
		t.Errorf("rejected updates %v", got)
	}
}

// answers counts what a stream of requests got answered.
type answers struct{ rls, check, metrics, policies atomic.Int64 }

type counts struct{ rls, check, metrics, policies int64 }

func (a *answers) now() counts {
	return counts{a.rls.Load(), a.check.Load(), a.metrics.Load(), a.policies.Load()}
}

// TestDecisionsContinueWhileAVersionApplies: while a version of 20,000
// descriptors is received, decoded, validated and put in force, streams of
// RLS decisions, HTTP checks, /metrics scrapes and /v1/policies listings
// keep being answered, under the configuration in force until the new one
// is swapped in whole. What each stream got answered is counted from just
// before the server sends the version until it is in force, rather than
// timed.
func TestDecisionsContinueWhileAVersionApplies(t *testing.T) {
	cp := xdstest.Start(t, "127.0.0.1:0")
	cp.Set("v1", xdstest.Domain("edge", "remote_address", "", 1<<30))
	files, err := config.ParseDocuments()
	if err != nil {
		t.Fatal(err)
	}
	svc := service.New(storestack.Of(memory.New()), files, service.WithLogger(quiet))
	rls := envoyrls.New(svc)
	web := httptest.NewServer(httpapi.New(svc))
	t.Cleanup(web.Close)

	var a answers
	var sent, done atomic.Pointer[counts]
	cp.OnSend(func(version string) {
		if c := a.now(); version == "v2" {
			sent.CompareAndSwap(nil, &c)
		}
	})
	c, err := xdsconfig.New(xdsconfig.Options{Server: cp.Addr, NodeID: xdstest.NodeID, Logger: quiet,
		Apply: func(cfg *config.Config) error {
			err := svc.ApplyDynamic(cfg)
			if c := a.now(); err == nil && cfg.Domains["big"] != nil {
				done.CompareAndSwap(nil, &c)
			}
			return err
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	wg.Go(func() { c.Run(ctx) })
	<-c.Applied()

	// The streams, each one request at a time.
	fail := make(chan string, 4)
	stream := func(count *atomic.Int64, ask func() string) {
		wg.Go(func() {
			for ctx.Err() == nil {
				if problem := ask(); problem != "" {
					if ctx.Err() == nil {
						fail <- problem
					}
					return
				}
				count.Add(1)
			}
		})
	}
	stream(&a.rls, func() string {
		resp, err := rls.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{
			{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "10.0.0.1"}}}}})
		if err != nil || resp.GetOverallCode() != ok {
			return "RLS: " + resp.GetOverallCode().String()
		}
		return ""
	})
	httpCall := func(method, path, body string) string {
		req, err := http.NewRequestWithContext(ctx, method, web.URL+path, strings.NewReader(body))
		if err != nil {
			return err.Error()
		}
		resp, err := web.Client().Do(req)
		if err != nil {
			return method + " " + path + ": " + err.Error()
		}
		defer resp.Body.Close()
		if _, err := io.Copy(io.Discard, resp.Body); err != nil || resp.StatusCode != http.StatusOK {
			return method + " " + path + ": " + resp.Status
		}
		return ""
	}
	stream(&a.check, func() string {
		return httpCall("POST", "/v1/check", `{"policy":"edge.remote_address","key":"k"}`)
	})
	stream(&a.metrics, func() string { return httpCall("GET", "/metrics", "") })
	stream(&a.policies, func() string { return httpCall("GET", "/v1/policies", "") })

	cp.Set("v2", xdstest.Domain("edge", "remote_address", "", 1<<30), flat("big", 20_000))
	testwait.Until(t, "v2 in force", func() bool { return done.Load() != nil })
	cancel()
	select {
	case problem := <-fail:
		t.Fatal(problem)
	default:
	}
	from, to := sent.Load(), done.Load()
	if from == nil {
		t.Fatal("v2 was applied but never seen sent")
	}
	t.Logf("answered while v2 was sent, decoded, validated and applied: %d RLS decisions, %d HTTP checks, %d /metrics, %d /v1/policies",
		to.rls-from.rls, to.check-from.check, to.metrics-from.metrics, to.policies-from.policies)
	if to.rls-from.rls < 10 || to.check-from.check < 10 || to.metrics-from.metrics < 2 || to.policies-from.policies < 2 {
		t.Errorf("the streams stalled while the version applied")
	}
	if got := svc.Config().Match("big", []config.Entry{{Key: "user", Value: "u19999"}}); len(got.Limits) != 1 || got.Limits[0].Limit != 20_000 {
		t.Errorf("the last descriptor of v2: %+v", got.Limits)
	}
}
