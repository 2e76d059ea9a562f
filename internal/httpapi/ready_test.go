package httpapi_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/httpapi"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/service"
	"github.com/sluicehq/sluice/internal/storestack"
	"github.com/sluicehq/sluice/internal/testwait"
)

// readyBody is the body of /readyz and /readyz/store.
type readyBody struct {
	Status     string              `json:"status"`
	WaitingFor string              `json:"waiting_for"`
	Store      service.StoreStatus `json:"store"`
}

// getReady returns the status code and body of a readiness path.
func getReady(t *testing.T, url string) (int, readyBody) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var b readyBody
	if err := json.Unmarshal(raw, &b); err != nil {
		t.Fatalf("GET %s: %d %q: %v", url, resp.StatusCode, raw, err)
	}
	return resp.StatusCode, b
}

// TestReadyFollowsFailPolicy: with Redis down, a node answers every check by
// its fail policy — open, closed and local alike — so /readyz stays 200
// ("degraded", saying why), while /readyz/store, the strict check, is 503
// until Redis decides again.
func TestReadyFollowsFailPolicy(t *testing.T) {
	for _, onError := range []string{"local", "closed", "open"} {
		t.Run(onError, func(t *testing.T) {
			r := redistest.Start(t)
			r.Kill()
			store, err := storestack.Open(config.Store{URL: r.URL(), OnError: onError})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { store.Close() })
			srv := httptest.NewServer(httpapi.New(service.New(store, testConfig(testPolicies...))))
			t.Cleanup(srv.Close)

			code, b := getReady(t, srv.URL+"/readyz")
			if code != 200 || b.Status != "degraded" || b.Store.Ready || b.Store.Error == "" || b.Store.OnError != onError {
				t.Fatalf("/readyz with Redis down: %d %+v; want 200 degraded, the store not ready, on_error %s", code, b, onError)
			}
			code, b = getReady(t, srv.URL+"/readyz/store")
			if code != 503 || b.Status != "unavailable" || b.Store.Ready || b.Store.OnError != onError {
				t.Fatalf("/readyz/store with Redis down: %d %+v; want 503 unavailable", code, b)
			}

			r.Restart()
			testwait.UntilSaw(t, "/readyz/store 200 after Redis' restart", func() (bool, string) {
				code, b = getReady(t, srv.URL+"/readyz/store")
				return code == 200 && b.Status == "ready" && b.Store.Ready, fmt.Sprintf("%d %+v", code, b)
			})
			if code, b := getReady(t, srv.URL+"/readyz"); code != 200 || b.Status != "ready" || !b.Store.Ready {
				t.Fatalf("/readyz with Redis back: %d %+v", code, b)
			}
		})
	}
}

// TestReadyDrainingAndStarting: while starting or draining, both readiness
// paths are 503 whatever the store says.
func TestReadyDrainingAndStarting(t *testing.T) {
	var draining atomic.Bool
	var waiting atomic.Value
	waiting.Store("the first configuration")
	e := newMemoryEnv(t, httpapi.WithDraining(draining.Load), httpapi.WithStarting(func() string { return waiting.Load().(string) }))
	for _, path := range []string{"/readyz", "/readyz/store"} {
		if code, b := getReady(t, e.url+path); code != 503 || b.Status != "starting" || b.WaitingFor != "the first configuration" {
			t.Errorf("%s while starting: %d %+v", path, code, b)
		}
	}
	waiting.Store("")
	for _, path := range []string{"/readyz", "/readyz/store"} {
		if code, b := getReady(t, e.url+path); code != 200 || b.Status != "ready" || !b.Store.Ready {
			t.Errorf("%s once started: %d %+v", path, code, b)
		}
	}
	draining.Store(true)
	for _, path := range []string{"/readyz", "/readyz/store"} {
		if code, b := getReady(t, e.url+path); code != 503 || b.Status != "draining" {
			t.Errorf("%s while draining: %d %+v", path, code, b)
		}
	}
}
