package envoy

import (
	"fmt"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/sluicehq/sluice/internal/config"
)

// ratelimitExample is the rate limit configuration the Envoy configurations
// send their descriptors for.
const ratelimitExample = "examples/envoy-ratelimit.yaml"

// loadRatelimitExample loads it as sluice serve does, and returns it with its
// one domain.
func loadRatelimitExample(t *testing.T) (*config.Config, string) {
	t.Helper()
	cfg, err := config.Load(repoFile(ratelimitExample))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Domains) != 1 {
		t.Fatalf("%s: %d domains, want 1", ratelimitExample, len(cfg.Domains))
	}
	for d := range cfg.Domains {
		return cfg, d
	}
	return nil, ""
}

// request is what a descriptor is made from: a request as Envoy sees it.
type request struct {
	path    string
	addr    string
	headers map[string]string
}

// sampleRequest is a request to path from a client sending every header
// the examples make descriptors from.
func sampleRequest(path string) request {
	return request{path: path, addr: "192.0.2.10", headers: map[string]string{"x-user-id": "u-1", "x-client-id": "acme"}}
}

// descriptor returns the entries Envoy makes from rl's actions for r, as
// Envoy's rate limit actions define them.
func descriptor(t *testing.T, rl *routev3.RateLimit, r request) []config.Entry {
	t.Helper()
	var entries []config.Entry
	for _, a := range rl.GetActions() {
		var e config.Entry
		switch a := a.GetActionSpecifier().(type) {
		case *routev3.RateLimit_Action_RemoteAddress_:
			e = config.Entry{Key: "remote_address", Value: r.addr}
		case *routev3.RateLimit_Action_RequestHeaders_:
			name := a.RequestHeaders.GetHeaderName()
			v, ok := r.headers[name]
			if name == ":path" {
				v, ok = r.path, true
			}
			if !ok {
				t.Fatalf("the sample request has no %s header", name)
			}
			e = config.Entry{Key: a.RequestHeaders.GetDescriptorKey(), Value: v}
		case *routev3.RateLimit_Action_GenericKey_:
			e = config.Entry{Key: a.GenericKey.GetDescriptorKey(), Value: a.GenericKey.GetDescriptorValue()}
			if e.Key == "" {
				e.Key = "generic_key"
			}
		case *routev3.RateLimit_Action_HeaderValueMatch_:
			e = config.Entry{Key: a.HeaderValueMatch.GetDescriptorKey(), Value: a.HeaderValueMatch.GetDescriptorValue()}
			if e.Key == "" {
				e.Key = "header_match"
			}
		default:
			t.Fatalf("rate limit action %T: not one this test knows how Envoy turns into an entry", a)
		}
		entries = append(entries, e)
	}
	return entries
}

// checkLimited checks that every descriptor rate limits makes for r has a
// limit in domain of cfg: a descriptor nothing matches is sent to Sluice on
// every request and limits nothing.
func checkLimited(t *testing.T, what string, cfg *config.Config, domain string, limits []*routev3.RateLimit, r request) int {
	t.Helper()
	if len(limits) == 0 {
		t.Errorf("%s: no rate_limits", what)
	}
	for _, rl := range limits {
		entries := descriptor(t, rl, r)
		m := cfg.Match(domain, entries)
		if len(m.Limits) == 0 {
			t.Errorf("%s: descriptor %v matches no limit of domain %s in %s", what, entries, domain, ratelimitExample)
			continue
		}
		names := ""
		for _, p := range m.Limits {
			names += fmt.Sprintf(" %s (%d/%v)", p.Name, p.Limit, p.Period)
		}
		t.Logf("%s: %v →%s", what, entries, names)
	}
	return len(limits)
}
