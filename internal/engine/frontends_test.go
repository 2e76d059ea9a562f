package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/envoyrls"
	"github.com/sluicehq/sluice/internal/httpapi"
	"github.com/sluicehq/sluice/internal/overrides"
	"github.com/sluicehq/sluice/internal/proxy"
	"github.com/sluicehq/sluice/internal/service"
	"github.com/sluicehq/sluice/internal/storestack"
	"github.com/sluicehq/sluice/memory"
	"github.com/sluicehq/sluice/storetest"
)

// The configuration every front end decides under, as two files: an Envoy
// domain with an enforced limit per user (edge.user), a shadow one
// (edge.trial) and a ban of one user (requests_per_unit: 0,
// edge.user_mallory); and the proxy's routes over the same policies, keyed
// by X-User, as Envoy keys them by the descriptor's value.
const (
	envoyFile = `domain: edge
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: user
    value: mallory
    rate_limit: {unit: minute, requests_per_unit: 0}
  - key: trial
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
`
	proxyFile = `proxy:
  routes:
    - match: {headers: {X-User: mallory}}
      limits: [{policy: edge.user_mallory, key: "header:X-User"}, {policy: edge.trial, key: "header:X-User"}]
    - limits: [{policy: edge.user, key: "header:X-User"}, {policy: edge.trial, key: "header:X-User"}]
`
)

// frontEnd decides the request of user, asked through one front end, and
// says whether it was allowed.
type frontEnd func(t *testing.T, user string) bool

// TestFrontEndsAgree sends the same requests through Envoy's rate limit
// service, the HTTP API, the reverse proxy and the forward-auth endpoint,
// each on real loopback listeners over a service of its own with one shared
// configuration and the same runtime override (bob may send 5 a minute, not
// 3), and finds the same answers and the same sluice_decisions_total: the
// enforced limit's allowed and denied, the shadow limit's allowed and
// shadow_denied, the ban's denied.
func TestFrontEndsAgree(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{"envoy.yaml": envoyFile, "proxy.yaml": proxyFile} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	users := []string{"alice", "alice", "alice", "alice", "alice", "bob", "bob", "bob", "bob", "bob", "bob", "mallory", "mallory", "mallory"}
	wantAllowed := []bool{true, true, true, false, false, true, true, true, true, true, false, false, false, false}
	want := map[string]float64{
		`edge.user/allowed`: 8, `edge.user/denied`: 3,
		`edge.trial/allowed`: 2, `edge.trial/shadow_denied`: 6,
		`edge.user_mallory/denied`: 3,
	}
	starters := map[string]func(*testing.T, *service.Service) frontEnd{
		"envoy rls": rlsFrontEnd, "http api": httpFrontEnd, "proxy": proxyFrontEnd, "forward-auth": forwardAuthFrontEnd,
	}
	for name, start := range starters {
		t.Run(name, func(t *testing.T) {
			svc := newService(t, dir)
			ask := start(t, svc)
			for i, user := range users {
				if got := ask(t, user); got != wantAllowed[i] {
					t.Fatalf("request %d (%s): allowed %v, want %v", i, user, got, wantAllowed[i])
				}
			}
			got := decisions(t, svc)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("sluice_decisions_total:\n got %v\nwant %v", got, want)
			}
		})
	}
}

// newService loads the configuration in dir and returns a service deciding
// under it on a memory store, with bob's runtime override, on a standing
// clock.
func newService(t *testing.T, dir string) *service.Service {
	t.Helper()
	cfg, err := config.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	clock := storetest.NewClock(storetest.Epoch)
	quiet := slog.New(slog.DiscardHandler)
	ov := overrides.NewMemory(overrides.WithClock(clock), overrides.WithLogger(quiet))
	if _, err := ov.Put(context.Background(), cfg.Policy("edge.user").Policy, overrides.Override{Key: "bob", Limit: 5, Period: time.Minute}); err != nil {
		t.Fatal(err)
	}
	return service.New(storestack.Of(memory.New(memory.WithClock(clock))), cfg, service.WithOverrides(ov), service.WithLogger(quiet))
}

// decisions reads sluice_decisions_total from svc's /metrics registry:
// "policy/decision" → count, zeros left out.
func decisions(t *testing.T, svc *service.Service) map[string]float64 {
	t.Helper()
	mfs, err := svc.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "sluice_decisions_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if v := m.GetCounter().GetValue(); v != 0 {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				out[labels["policy"]+"/"+labels["decision"]] = v
			}
		}
	}
	return out
}

// rlsFrontEnd serves Envoy's rate limit service on a loopback port and asks
// it with a descriptor per limit, as an Envoy route's actions would.
func rlsFrontEnd(t *testing.T, svc *service.Service) frontEnd {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	envoyrls.New(svc).Register(g)
	go g.Serve(lis)
	t.Cleanup(g.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	client := rlsv3.NewRateLimitServiceClient(conn)
	desc := func(key, value string) *ratelimitv3.RateLimitDescriptor {
		return &ratelimitv3.RateLimitDescriptor{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: key, Value: value}}}
	}
	return func(t *testing.T, user string) bool {
		resp, err := client.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "edge",
			Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("user", user), desc("trial", user)}})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetOverallCode() == rlsv3.RateLimitResponse_OK
	}
}

// httpFrontEnd serves the HTTP API and posts a check per limit.
func httpFrontEnd(t *testing.T, svc *service.Service) frontEnd {
	srv := httptest.NewServer(httpapi.New(svc))
	t.Cleanup(srv.Close)
	return func(t *testing.T, user string) bool {
		limit := "edge.user"
		if user == "mallory" {
			limit = "edge.user_mallory"
		}
		body := fmt.Sprintf(`{"checks":[{"policy":%q,"key":%q},{"policy":"edge.trial","key":%q}]}`, limit, user, user)
		resp, err := srv.Client().Post(srv.URL+"/v1/check", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct{ Allowed bool }
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		if (resp.StatusCode == http.StatusOK) != out.Allowed {
			t.Fatalf("status %d for allowed %v", resp.StatusCode, out.Allowed)
		}
		return out.Allowed
	}
}

// proxyFrontEnd serves the reverse proxy in front of an upstream and sends
// it a request as X-User.
func proxyFrontEnd(t *testing.T, svc *service.Service) frontEnd {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	t.Cleanup(up.Close)
	u, _ := url.Parse(up.URL)
	h, err := proxy.New(svc, u)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return func(t *testing.T, user string) bool {
		return status(t, srv, "/api/items", "X-User", user) == http.StatusNoContent
	}
}

// forwardAuthFrontEnd serves the forward-auth endpoint and asks it about a
// request as X-User, as Traefik would.
func forwardAuthFrontEnd(t *testing.T, svc *service.Service) frontEnd {
	h, err := proxy.ForwardAuth(svc)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return func(t *testing.T, user string) bool {
		return status(t, srv, proxy.ForwardAuthPath, "X-User", user,
			proxy.HeaderForwardedMethod, "GET", proxy.HeaderForwardedURI, "/api/items") == http.StatusOK
	}
}

// status sends a GET to path on srv with the header fields kv and returns
// the status; a status other than an admission or 429 fails the test.
func status(t *testing.T, srv *httptest.Server, path string, kv ...string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		req.Header.Set(kv[i], kv[i+1])
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK, http.StatusNoContent, http.StatusTooManyRequests:
	default:
		t.Fatalf("status %d", resp.StatusCode)
	}
	return resp.StatusCode
}
