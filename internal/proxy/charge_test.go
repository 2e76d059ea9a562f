package proxy

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/testlog"
	"github.com/sluicehq/sluice/internal/testwait"
	"github.com/sluicehq/sluice/memory"
)

const chargeConfig = `policies:
  - {name: tokens, algorithm: fixed_window, limit: 10, period: 1m}
proxy:
  routes:
    - limits: [{policy: tokens, key: "header:X-User", charge_header: x-tokens-used}]
`

// tokenUpstream reports the usage its request asks for (?used=N) in
// X-Tokens-Used, as a header or, with ?trailer, as a trailer after the
// body.
func tokenUpstream(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		used := r.URL.Query().Get("used")
		if r.URL.Query().Has("trailer") {
			w.Header().Set("Trailer", "X-Tokens-Used")
			io.WriteString(w, "streamed answer")
			w.Header().Set("X-Tokens-Used", used)
			return
		}
		if used != "" {
			w.Header().Set("X-Tokens-Used", used)
		}
		io.WriteString(w, "answer")
	}))
	t.Cleanup(srv.Close)
	return srv
}

// A response reporting 15 tokens on a limit of 10 a minute: the key owes
// the excess and is denied until the window ends.
func TestChargeHeader(t *testing.T) {
	for _, mode := range []string{"header", "trailer"} {
		t.Run(mode, func(t *testing.T) {
			p := startProxy(t, chargeConfig, tokenUpstream(t).URL)
			path := "/chat?used=15"
			if mode == "trailer" {
				path += "&trailer"
			}
			resp := p.get(t, path, "X-User", "carol")
			if resp.StatusCode != 200 || mode == "trailer" && resp.Trailer.Get("X-Tokens-Used") != "15" {
				t.Fatalf("first: %d, trailer %q", resp.StatusCode, resp.Trailer)
			}
			resp = p.get(t, "/chat", "X-User", "carol")
			if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "60" {
				t.Fatalf("after a charge of 15: %d, Retry-After %q; want 429 and 60 (the window's end)", resp.StatusCode, resp.Header.Get("Retry-After"))
			}
			if got := p.get(t, "/chat", "X-User", "dave").StatusCode; got != 200 {
				t.Fatalf("another key: %d, want 200", got)
			}
		})
	}
}

// A value that is not a non-negative integer charges nothing, with a log
// line; so does a response without the header.
func TestChargeHeaderBadValue(t *testing.T) {
	var logs testlog.Buffer
	p := startProxy(t, chargeConfig, tokenUpstream(t).URL, Logger(testlog.Logger(&logs)))
	for _, used := range []string{"-15", "15.0", "abc", "", "99999999999999999999"} {
		if got := p.get(t, "/chat?used="+used, "X-User", "carol").StatusCode; got != 200 {
			t.Fatalf("used=%q: %d, want 200 (nothing charged before)", used, got)
		}
	}
	// 5 requests of cost 1 so far: 5 more fit.
	for i := range 5 {
		if got := p.get(t, "/chat", "X-User", "carol").StatusCode; got != 200 {
			t.Fatalf("request %d: %d, want 200: a bad value must charge nothing", 6+i, got)
		}
	}
	if n := strings.Count(logs.String(), "usage cannot be read"); n != 4 {
		t.Fatalf("%d bad values logged, want 4: %s", n, logs.String())
	}
}

// A client that goes away while the upstream's answer streams is charged
// the usage the upstream reported.
func TestChargeHeaderClientGone(t *testing.T) {
	// Only the first request (?hold) reports usage and streams until its
	// client goes; the polls below answer at once, charging nothing, since
	// one admitted before the charge lands must not hang the test.
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !r.URL.Query().Has("hold") {
			io.WriteString(w, "answer")
			return
		}
		w.Header().Set("X-Tokens-Used", "15")
		io.WriteString(w, "the start")
		w.(http.Flusher).Flush()
		<-r.Context().Done() // the proxy gave up on it: its client went away
	}))
	t.Cleanup(upstream.Close)
	p := startProxy(t, chargeConfig, upstream.URL)

	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+"/chat?hold", nil)
	req.Header.Set("X-User", "carol")
	resp, err := p.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len("the start"))
	if _, err := io.ReadFull(resp.Body, buf); err != nil {
		t.Fatal(err)
	}
	cancel()
	resp.Body.Close()
	testwait.Until(t, "the gone client's usage is charged", func() bool {
		return p.get(t, "/chat", "X-User", "carol").StatusCode == http.StatusTooManyRequests
	})
}

func TestForwardAuthRefusesCharge(t *testing.T) {
	cfg, err := config.Parse("t.yaml", []byte(chargeConfig))
	if err != nil {
		t.Fatal(err)
	}
	_, err = ForwardAuth(serviceOf(cfg, memory.New()))
	if err == nil || !strings.Contains(err.Error(), "charge_header X-Tokens-Used, which forward-auth cannot serve") {
		t.Fatalf("ForwardAuth: %v", err)
	}
}

// A route limit's cost: 0 checks with a peek, so that a limit charged from
// the response takes only what the response reports; cost: 3 takes three
// units a request.
func TestRouteCost(t *testing.T) {
	const cfg = `policies:
  - {name: tokens, algorithm: fixed_window, limit: 10, period: 1m}
  - {name: heavy, algorithm: fixed_window, limit: 10, period: 1m}
proxy:
  routes:
    - match: {path_prefix: /chat}
      limits: [{policy: tokens, key: "header:X-User", charge_header: x-tokens-used, cost: 0}]
    - match: {path_prefix: /export}
      limits: [{policy: heavy, key: "header:X-User", cost: 3}]
`
	p := startProxy(t, cfg, tokenUpstream(t).URL)
	// 9 of 10 used: a peek still finds one left, however often it looks.
	for i, path := range []string{"/chat?used=9", "/chat", "/chat", "/chat?used=2"} {
		if got := p.get(t, path, "X-User", "carol").StatusCode; got != 200 {
			t.Fatalf("request %d (%s): %d, want 200", i, path, got)
		}
	}
	if got := p.get(t, "/chat", "X-User", "carol").StatusCode; got != http.StatusTooManyRequests {
		t.Fatalf("after 11 of 10 charged: %d, want 429", got)
	}
	for i := range 3 {
		if got := p.get(t, "/export", "X-User", "carol").StatusCode; got != 200 {
			t.Fatalf("export %d: %d, want 200", i, got)
		}
	}
	if got := p.get(t, "/export", "X-User", "carol").StatusCode; got != http.StatusTooManyRequests {
		t.Fatalf("a fourth export of 3 units on 10: %d, want 429", got)
	}
}
