package httpapi_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/httpapi"
	"github.com/sluicehq/sluice/internal/service"
	"github.com/sluicehq/sluice/internal/storestack"
	"github.com/sluicehq/sluice/internal/testlog"
	"github.com/sluicehq/sluice/memory"
	"github.com/sluicehq/sluice/storetest"
)

func randomToken(t *testing.T) string {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func TestCheckAdminToken(t *testing.T) {
	b := make([]byte, 32)
	rand.Read(b)
	for _, ok := range []string{randomToken(t), base64.StdEncoding.EncodeToString(b), randomToken(t)[:32]} {
		if err := httpapi.CheckAdminToken(ok); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	for _, weak := range []string{"x", "s3cret", randomToken(t)[:31], strings.Repeat("a", 64), strings.Repeat("abcdefg", 8)} {
		err := httpapi.CheckAdminToken(weak)
		if err == nil || !strings.Contains(err.Error(), "openssl rand -hex 32") {
			t.Errorf("%q: %v, want a refusal saying how to generate one", weak, err)
			continue
		}
		if len(weak) > 5 && strings.Contains(err.Error(), weak) {
			t.Errorf("the refusal quotes the token: %v", err)
		}
	}
}

// syncLog is a log destination safe for concurrent writes.
type syncLog struct{ testlog.Buffer }

// refusals returns the log lines about refused admin requests.
func (l *syncLog) refusals() []string {
	var out []string
	for _, line := range strings.Split(l.String(), "\n") {
		if strings.Contains(line, "admin API request refused") {
			out = append(out, line)
		}
	}
	return out
}

// adminEnv is an HTTP API with an admin token, on a loopback server that
// clients reach from several loopback addresses, with a fake clock.
type adminEnv struct {
	url   string
	token string
	clock *storetest.Clock
	svc   *service.Service
	log   *syncLog
}

func newAdminEnv(t *testing.T, handler func(*service.Service, ...httpapi.Option) http.Handler) *adminEnv {
	t.Helper()
	e := &adminEnv{token: randomToken(t), clock: storetest.NewClock(storetest.Epoch), log: &syncLog{}}
	e.svc = service.New(storestack.Of(memory.New(memory.WithClock(e.clock))), testConfig(testPolicies...),
		service.WithLogger(slog.New(slog.NewTextHandler(e.log, nil))))
	srv := httptest.NewServer(handler(e.svc, httpapi.WithAdminToken(e.token), httpapi.WithClock(e.clock)))
	t.Cleanup(srv.Close)
	e.url = srv.URL
	return e
}

// reset sends POST /v1/admin/reset from the loopback address from, with
// Authorization auth (none when empty).
func (e *adminEnv) reset(t *testing.T, from, auth string) (*http.Response, string) {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return d.DialContext(ctx, network, addr)
		},
	}}
	defer c.CloseIdleConnections()
	req, _ := http.NewRequest("POST", e.url+"/v1/admin/reset", strings.NewReader(`{"policy":"per_user","key":"a"}`))
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func errorMessage(t *testing.T, body string) string {
	t.Helper()
	var v struct {
		Error struct{ Code, Message string }
	}
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	return v.Error.Code + ": " + v.Error.Message
}

// A missing token and a wrong one get 401 saying which, never the token.
func TestAdminAuthMessages(t *testing.T) {
	e := newAdminEnv(t, httpapi.New)
	for _, tc := range []struct{ auth, want string }{
		{"", "unauthorized: the admin API needs the bearer token"},
		{"Basic " + e.token, "unauthorized: the admin API needs the bearer token"},
		{"Bearer " + e.token[:40], "unauthorized: the bearer token is wrong"},
		{"Bearer " + e.token + "x", "unauthorized: the bearer token is wrong"},
	} {
		resp, body := e.reset(t, "127.0.0.1", tc.auth)
		if msg := errorMessage(t, body); resp.StatusCode != 401 || !strings.HasPrefix(msg, tc.want) || resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("Authorization %.12q…: %d %s, want 401 %q", tc.auth, resp.StatusCode, msg, tc.want)
		}
		if strings.Contains(body, e.token[:16]) {
			t.Errorf("the answer quotes the token: %s", body)
		}
	}
	if resp, body := e.reset(t, "127.0.0.1", "Bearer "+e.token); resp.StatusCode != 200 {
		t.Errorf("the token: %d %s", resp.StatusCode, body)
	}
}

// An address that sends more than AdminFailureBurst wrong tokens gets 429
// with Retry-After, its tokens unchecked (the right one included), until
// its failures drain; another address is not affected. Failures and
// throttled requests are counted; log lines about them are limited.
func TestAdminFailuresSlowDown(t *testing.T) {
	e := newAdminEnv(t, httpapi.New)
	const attacker, admin = "127.0.0.2", "127.0.0.3"
	wrong := "Bearer " + randomToken(t)
	for i := range httpapi.AdminFailureBurst {
		if resp, body := e.reset(t, attacker, wrong); resp.StatusCode != 401 {
			t.Fatalf("wrong token %d: %d %s", i, resp.StatusCode, body)
		}
	}
	for _, auth := range []string{wrong, "", "Bearer " + e.token} {
		resp, body := e.reset(t, attacker, auth)
		if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "6" || !strings.HasPrefix(errorMessage(t, body), "too_many_failures") {
			t.Fatalf("after %d failures, Authorization %.12q…: %d Retry-After %q %s, want 429 after 6 s",
				httpapi.AdminFailureBurst, auth, resp.StatusCode, resp.Header.Get("Retry-After"), body)
		}
	}
	if resp, body := e.reset(t, admin, "Bearer "+e.token); resp.StatusCode != 200 {
		t.Fatalf("the admin, from another address: %d %s", resp.StatusCode, body)
	}
	if resp, _ := e.reset(t, admin, wrong); resp.StatusCode != 401 {
		t.Fatalf("a wrong token from another address: %d, want 401", resp.StatusCode)
	}
	// Refusals at one instant: 10 log lines at most.
	lines := e.log.refusals()
	if len(lines) != 10 {
		t.Errorf("%d log lines for 14 refusals at one instant, want 10:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	for _, l := range lines {
		if strings.Contains(l, e.token[:16]) || !strings.Contains(l, "client=127.0.0.") {
			t.Errorf("log line %q", l)
		}
	}

	e.clock.Advance(httpapi.AdminFailurePeriod / httpapi.AdminFailureBurst)
	if resp, body := e.reset(t, attacker, "Bearer "+e.token); resp.StatusCode != 200 {
		t.Fatalf("the token once a failure drained: %d %s", resp.StatusCode, body)
	}
	if resp, _ := e.reset(t, attacker, wrong); resp.StatusCode != 401 {
		t.Fatalf("one more wrong token once a failure drained: %d, want 401", resp.StatusCode)
	}
	if resp, _ := e.reset(t, attacker, wrong); resp.StatusCode != 429 {
		t.Fatalf("and the next: %d, want 429", resp.StatusCode)
	}
	failures := metricValue(t, e.svc, "sluice_admin_auth_failures_total")
	throttled := metricValue(t, e.svc, "sluice_admin_auth_throttled_total")
	if failures != httpapi.AdminFailureBurst+2 || throttled != 4 {
		t.Errorf("failures %v, throttled %v; want %d and 4", failures, throttled, httpapi.AdminFailureBurst+2)
	}
	// The log lines' limit drains too; a line counts the refusals left out.
	lines = e.log.refusals()
	if len(lines) != 11 || !strings.Contains(lines[10], "unlogged_since_last=4") {
		t.Errorf("after 6 s, %d lines, the last %q; want 11, with unlogged_since_last=4", len(lines), lines[len(lines)-1])
	}
}

// metricValue is the value of the unlabelled counter name in svc's registry.
func metricValue(t *testing.T, svc *service.Service, name string) float64 {
	t.Helper()
	mfs, err := svc.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no counter %s", name)
	return 0
}
