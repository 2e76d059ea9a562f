package httpapi_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/httpapi"
	"github.com/sluicehq/sluice/internal/service"
	"github.com/sluicehq/sluice/internal/storestack"
	"github.com/sluicehq/sluice/memory"
)

// downStore fails every decision, as a store whose Redis is gone.
type downStore struct{}

func (downStore) Decide(context.Context, sluice.Request) (sluice.Result, error) {
	return sluice.Result{}, errors.New("connection refused")
}

func (downStore) DecideAll(context.Context, []sluice.Request, []sluice.Result) error {
	return errors.New("connection refused")
}

// getStatus GETs url and returns the status and the body.
func getStatus(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestHealthcheck: GET /healthcheck answers as envoyproxy/ratelimit's, 200
// "OK" or 500: unhealthy while draining or starting; the store and the
// domains count only when asked to (ratelimit's
// REDIS_HEALTH_CHECK_ACTIVE_CONNECTION, HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED).
func TestHealthcheck(t *testing.T) {
	var draining atomic.Bool
	var waiting atomic.Value
	waiting.Store("")
	serve := func(store sluice.Store, cfg *config.Config, h httpapi.Healthcheck) string {
		svc := service.New(storestack.Of(store), cfg)
		srv := httptest.NewServer(httpapi.New(svc, httpapi.WithDraining(draining.Load),
			httpapi.WithStarting(func() string { return waiting.Load().(string) }), httpapi.WithHealthcheck(h)))
		t.Cleanup(srv.Close)
		return srv.URL + "/healthcheck"
	}
	noDomains := testConfig(testPolicies...)
	withDomain := testConfig(testPolicies...)
	withDomain.Domains = map[string]*config.Domain{"edge": {Name: "edge"}}
	check := func(url string, want int, wantBody string) {
		t.Helper()
		if code, body := getStatus(t, url); code != want || (wantBody != "" && body != wantBody) {
			t.Fatalf("%s: %d %q, want %d %q", url, code, body, want, wantBody)
		}
	}
	// By default neither the store nor the domains count.
	plain := serve(downStore{}, noDomains, httpapi.Healthcheck{})
	check(plain, http.StatusOK, "OK")
	draining.Store(true)
	check(plain, http.StatusInternalServerError, "draining\n")
	draining.Store(false)
	waiting.Store("the first configuration from the xDS server")
	check(plain, http.StatusInternalServerError, "starting: waiting for the first configuration from the xDS server\n")
	waiting.Store("")

	check(serve(downStore{}, noDomains, httpapi.Healthcheck{Store: true}), http.StatusInternalServerError, "the store does not answer\n")
	check(serve(memory.New(), noDomains, httpapi.Healthcheck{Store: true}), http.StatusOK, "OK")
	check(serve(memory.New(), noDomains, httpapi.Healthcheck{Domains: true}), http.StatusInternalServerError, "no rate limit domain loaded\n")
	check(serve(memory.New(), withDomain, httpapi.Healthcheck{Domains: true, Store: true}), http.StatusOK, "OK")
}

// TestWithRoute: a route added with WithRoute answers its method, and
// another method gets the API's 405.
func TestWithRoute(t *testing.T) {
	e := newMemoryEnv(t, httpapi.WithRoute("POST", "/json", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"routed":true}`))
	})))
	resp, err := http.Post(e.url+"/json", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /json: %d", resp.StatusCode)
	}
	if code, body := getStatus(t, e.url+"/json"); code != http.StatusMethodNotAllowed {
		t.Fatalf("GET /json: %d %q", code, body)
	}
}
