package proxy

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/testwait"
	"github.com/sluicehq/sluice/memory"
)

const inflightConfig = "policies:\n  - {name: inflight, algorithm: concurrency, limit: 1, period: 1h}\n" +
	"proxy:\n  routes:\n    - limits: [{policy: inflight, key: global}]\n"

// TestProxyHoldsSlots: a request admitted under a concurrency limit holds
// its slot until the upstream's answer is through, or until its client
// goes; then the next is admitted.
func TestProxyHoldsSlots(t *testing.T) {
	entered, hold := make(chan string, 4), make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/hold":
			entered <- r.URL.Path
			<-hold
		case "/gone":
			entered <- r.URL.Path
			<-r.Context().Done()
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(up.Close)
	p := startProxy(t, inflightConfig, up.URL)

	held := make(chan int, 1)
	go func() {
		resp, err := p.Client().Get(p.URL + "/hold")
		if err != nil {
			held <- 0
			return
		}
		resp.Body.Close()
		held <- resp.StatusCode
	}()
	<-entered
	if got := p.get(t, "/now").StatusCode; got != http.StatusTooManyRequests {
		t.Fatalf("a second request while one is in flight: %d, want 429", got)
	}
	close(hold)
	if got := <-held; got != http.StatusOK {
		t.Fatalf("held request: %d", got)
	}
	if got := p.get(t, "/now").StatusCode; got != http.StatusOK {
		t.Fatalf("after the first ended: %d, want 200", got)
	}

	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", p.URL+"/gone", nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := p.Client().Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	<-entered
	if got := p.get(t, "/now").StatusCode; got != http.StatusTooManyRequests {
		t.Fatalf("while /gone is in flight: %d, want 429", got)
	}
	cancel()
	<-done
	testwait.Until(t, "the gone client's slot to return", func() bool { return p.get(t, "/now").StatusCode == http.StatusOK })
}

// TestForwardAuthRefusesSlots: forward-auth cannot tell when the gateway's
// request ends, so a route with a concurrency limit is refused.
func TestForwardAuthRefusesSlots(t *testing.T) {
	cfg, err := config.Parse("t.yaml", []byte(inflightConfig))
	if err != nil {
		t.Fatal(err)
	}
	_, err = ForwardAuth(serviceOf(cfg, memory.New()))
	if err == nil || !strings.Contains(err.Error(), `policy "inflight" is a concurrency limit, which forward-auth cannot serve`) {
		t.Fatalf("ForwardAuth: %v", err)
	}
}
