package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/testwait"
)

// Time limits of the fail-over tests. recoverWithin is how soon after Redis
// is back the service must notice (the breaker cools down in 200ms and
// /readyz probes past it); waitLimit bounds a read from a connection,
// generously, because the machine running the tests may be busy.
const (
	recoverWithin = 2 * time.Second
	waitLimit     = 10 * time.Second
)

// httpc bounds every request the tests make, so a wedged server fails the
// test instead of hanging it.
var httpc = &http.Client{Timeout: waitLimit}

// served is a `sluice serve` running in-process for one test.
type served struct {
	srv    *server
	base   string // http://127.0.0.1:PORT
	dir    string // where its config files are
	native string // the native config file's path
	logs   *syncBuffer
}

// serveSetup is what startServe varies: the flags, and the logger's level
// and format.
type serveSetup struct {
	opts      serveOptions
	logLevel  string
	logFormat string
}

// startServe writes native (a native config, usually with a store section)
// and envoyConfig into a fresh directory and runs serve on loopback ports
// with them, until the test ends. dir is created first so that native can
// be built with files placed in it (see startServeIn).
func startServe(t *testing.T, native string, mods ...func(*serveSetup)) *served {
	t.Helper()
	return startServeIn(t, t.TempDir(), native, mods...)
}

func startServeIn(t *testing.T, dir, native string, mods ...func(*serveSetup)) *served {
	t.Helper()
	s := &served{dir: dir, native: filepath.Join(dir, "sluice.yaml"), logs: &syncBuffer{}}
	envoy := filepath.Join(dir, "envoy.yaml")
	writeFile(t, s.native, native)
	writeFile(t, envoy, envoyConfig)
	setup := serveSetup{
		opts: serveOptions{configs: cli.StringList{s.native, envoy},
			httpAddr: "127.0.0.1:0", grpcAddr: "127.0.0.1:0", shutdown: 5 * time.Second},
		logLevel: "info", logFormat: "text",
	}
	for _, m := range mods {
		m(&setup)
	}
	log, err := newLogger(s.logs, setup.logFormat, setup.logLevel)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := startServer(ctx, setup.opts, log)
	if err != nil {
		cancel()
		t.Fatalf("startServer: %v\nlogs:\n%s", err, s.logs)
	}
	s.srv, s.base = srv, "http://"+srv.httpAddr.String()
	t.Cleanup(func() {
		cancel()
		srv.wait()
		if !strings.Contains(s.logs.String(), "stopped") {
			t.Errorf("no clean shutdown in the log:\n%s", s.logs)
		}
	})
	return s
}

// storeConfig is a native config: a Redis store at url with the given fail
// policy (and extra store lines), and policy api: gcra, limit 10 per hour,
// so that nothing refills while a test runs.
func storeConfig(url, onError string, extra ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "store:\n  url: %q\n  timeout: 50ms\n  on_error: %s\n  breaker:\n    min_calls: 2\n    cooldown: 200ms\n", url, onError)
	for _, l := range extra {
		b.WriteString("  " + l + "\n")
	}
	b.WriteString("policies:\n  - name: api\n    algorithm: gcra\n    limit: 10\n    period: 1h\n")
	return b.String()
}

// patientStoreConfig is storeConfig with a store timeout of 10 s, for tests
// of what reaches Redis (passwords, TLS) rather than of the fail policy: on a
// loaded machine a call may take longer than 50 ms, and the fail policy would
// then answer instead of Redis.
func patientStoreConfig(url, onError string, extra ...string) string {
	return strings.Replace(storeConfig(url, onError, extra...), "timeout: 50ms", "timeout: 10s", 1)
}

// do makes one request and returns the response (body read and closed) and
// its body.
func do(t *testing.T, method, url, body string, header ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := httpc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", method, url, err)
	}
	return resp, string(b)
}

// checkReply is the body of POST /v1/check, success or error.
type checkReply struct {
	Allowed bool `json:"allowed"`
	Checks  []struct {
		Allowed   bool  `json:"allowed"`
		Remaining int64 `json:"remaining"`
		Degraded  bool  `json:"degraded"`
	} `json:"checks"`
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// check posts one check of policy api for key.
func (s *served) check(t *testing.T, key string) (*http.Response, checkReply, string) {
	t.Helper()
	resp, body := do(t, "POST", s.base+"/v1/check", `{"policy":"api","key":"`+key+`"}`, "Content-Type", "application/json")
	var r checkReply
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatalf("/v1/check: %d %q: %v", resp.StatusCode, body, err)
	}
	return resp, r, body
}

// readyReply is the body of GET /readyz and /readyz/store.
type readyReply struct {
	Status string `json:"status"`
	Store  struct {
		Ready   bool   `json:"ready"`
		Error   string `json:"error"`
		Breaker string `json:"breaker"`
		OnError string `json:"on_error"`
	} `json:"store"`
}

// ready is GET /readyz: can the node answer checks (by Redis or by its fail
// policy)?
func (s *served) ready(t *testing.T) (int, readyReply, string) {
	t.Helper()
	return s.readyAt(t, "/readyz")
}

// storeReady is GET /readyz/store: does Redis decide?
func (s *served) storeReady(t *testing.T) (int, readyReply, string) {
	t.Helper()
	return s.readyAt(t, "/readyz/store")
}

func (s *served) readyAt(t *testing.T, path string) (int, readyReply, string) {
	t.Helper()
	resp, body := do(t, "GET", s.base+path, "")
	var r readyReply
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatalf("%s: %d %q: %v", path, resp.StatusCode, body, err)
	}
	return resp.StatusCode, r, body
}

// expectDegraded checks that /readyz is 200 "degraded" while the store
// cannot decide: the node answers by its fail policy, onError.
func (s *served) expectDegraded(t *testing.T, onError string) {
	t.Helper()
	if code, rd, body := s.ready(t); code != 200 || rd.Status != "degraded" || rd.Store.Ready || rd.Store.OnError != onError {
		t.Fatalf("/readyz with Redis down: %d %s; want 200 degraded, answering by on_error %s", code, body, onError)
	}
}

// metric returns the value of one series of /metrics, such as
// `sluice_store_timeout_seconds` or `sluice_store_degraded_decisions_total{on_error="open"}`;
// ok is false when the series is not exported.
func (s *served) metric(t *testing.T, series string) (v float64, ok bool) {
	t.Helper()
	resp, body := do(t, "GET", s.base+"/metrics", "")
	if resp.StatusCode != 200 {
		t.Fatalf("/metrics: %d", resp.StatusCode)
	}
	for _, line := range strings.Split(body, "\n") {
		if rest, found := strings.CutPrefix(line, series+" "); found {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil {
				t.Fatalf("/metrics: %q: %v", line, err)
			}
			return v, true
		}
	}
	return 0, false
}

// deadRedis starts a Redis only to learn a URL nothing listens on, and kills
// it; Restart brings it back on the same port.
func deadRedis(t *testing.T, opts ...redistest.Option) *redistest.Server {
	t.Helper()
	r := redistest.Start(t, opts...)
	r.Kill()
	return r
}

// TestServeStartsWhileRedisIsDown: with on_error open, serve starts while
// its Redis is down, alive and ready (answering by its fail policy) but not
// store-ready, admits requests marked degraded and says so in its metrics;
// once Redis is back /readyz/store turns 200 within recoverWithin and it
// decides on Redis again.
func TestServeStartsWhileRedisIsDown(t *testing.T) {
	r := deadRedis(t)
	// A patient timeout: a refused connection fails at once, and is counted as
	// one (cause=connection); at 50 ms a loaded machine made some calls time
	// out first.
	s := startServe(t, patientStoreConfig(r.URL(), "open"))

	if resp, body := do(t, "GET", s.base+"/healthz", ""); resp.StatusCode != 200 {
		t.Fatalf("/healthz: %d %s", resp.StatusCode, body)
	}
	code, rd, body := s.storeReady(t)
	if code != 503 || rd.Status != "unavailable" || rd.Store.Ready || rd.Store.Error == "" || rd.Store.Breaker == "" || rd.Store.OnError != "open" {
		t.Fatalf("/readyz/store with Redis down: %d %s", code, body)
	}
	if !strings.Contains(body, `"breaker":`) {
		t.Fatalf("/readyz/store has no breaker field: %s", body)
	}
	s.expectDegraded(t, "open")

	// Every request is admitted, marked degraded, and nothing is counted
	// (remaining stays at capacity - 1: open admits as if the key were new).
	for i := range 12 {
		resp, c, body := s.check(t, "alice")
		if resp.StatusCode != 200 || !c.Allowed || len(c.Checks) != 1 || !c.Checks[0].Degraded || c.Checks[0].Remaining != 9 {
			t.Fatalf("check %d with Redis down: %d %s", i, resp.StatusCode, body)
		}
	}
	testwait.UntilSaw(t, `sluice_store_breaker_state{state="closed"} 0`, func() (bool, string) {
		s.check(t, "alice") // the breaker opens after failures, and stays open while probes fail
		v, ok := s.metric(t, `sluice_store_breaker_state{state="closed"}`)
		return ok && v == 0, fmt.Sprintf("%v (exported: %v)", v, ok)
	})
	if v, ok := s.metric(t, `sluice_store_degraded_decisions_total{on_error="open"}`); !ok || v < 12 {
		t.Fatalf(`sluice_store_degraded_decisions_total{on_error="open"} = %v (exported: %v), want >= 12`, v, ok)
	}
	if v, _ := s.metric(t, `sluice_store_errors_total{cause="connection"}`); v < 2 {
		t.Errorf(`sluice_store_errors_total{cause="connection"} = %v, want at least the 2 that opened the breaker`, v)
	}
	if !strings.Contains(s.logs.String(), "store call failed") || !strings.Contains(s.logs.String(), "cause=connection") {
		t.Errorf("the failed store calls are not logged with their cause:\n%s", s.logs)
	}
	if code, rd, body := s.storeReady(t); code != 503 || rd.Store.Breaker == "closed" {
		t.Errorf("/readyz/store after the breaker opened: %d %s", code, body)
	}
	s.expectDegraded(t, "open")
	if !strings.Contains(s.logs.String(), "store circuit breaker") {
		t.Errorf("the breaker opening is not logged:\n%s", s.logs)
	}

	r.Restart()
	restarted := time.Now()
	testwait.Within(t, recoverWithin, "/readyz/store 200 after Redis came back", func() (bool, string) {
		code, rd, body := s.storeReady(t)
		return code == 200 && rd.Status == "ready" && rd.Store.Ready, fmt.Sprintf("%d %s", code, body)
	})
	testwait.Within(t, recoverWithin-time.Since(restarted), "/v1/check decided on Redis again", func() (bool, string) {
		resp, c, body := s.check(t, "bob")
		return resp.StatusCode == 200 && len(c.Checks) == 1 && !c.Checks[0].Degraded, body
	})
	// Decisions now count in Redis: bob's key is there, and the next check
	// sees what the one before consumed.
	keys, err := r.Do("KEYS", "*")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(keys, "{api:bob}") {
		t.Fatalf("no key for bob in Redis: %q", keys)
	}
	_, before, _ := s.check(t, "carol")
	_, after, body := s.check(t, "carol")
	if before.Checks[0].Degraded || after.Checks[0].Degraded || after.Checks[0].Remaining != before.Checks[0].Remaining-1 {
		t.Fatalf("Redis does not count: remaining %d then %s", before.Checks[0].Remaining, body)
	}
	if v, _ := s.metric(t, `sluice_store_breaker_state{state="closed"}`); v != 1 {
		t.Errorf(`sluice_store_breaker_state{state="closed"} = %v after recovery`, v)
	}
}

// TestServeFailClosedWhileRedisIsDown: with on_error closed and Redis down,
// the HTTP API answers 503 with Retry-After and "allowed": false, and the
// Envoy RLS API answers OVER_LIMIT (not a gRPC error, which Envoy's default
// failure_mode_deny=false would let through).
func TestServeFailClosedWhileRedisIsDown(t *testing.T) {
	r := deadRedis(t)
	s := startServe(t, storeConfig(r.URL(), "closed"))

	if code, rd, body := s.storeReady(t); code != 503 || rd.Store.Ready || rd.Store.OnError != "closed" || rd.Store.Breaker == "" {
		t.Fatalf("/readyz/store with Redis down: %d %s", code, body)
	}
	// Denying every check is the policy the operator chose: the node answers,
	// so it stays ready.
	s.expectDegraded(t, "closed")
	for i := range 4 { // before and after the breaker opens (after 2 failures)
		resp, c, body := s.check(t, "alice")
		ra, err := strconv.Atoi(resp.Header.Get("Retry-After"))
		if resp.StatusCode != 503 || err != nil || ra < 1 || c.Allowed || !strings.Contains(body, `"allowed":false`) ||
			c.Error == nil || c.Error.Code != "store_unavailable" {
			t.Fatalf("check %d with Redis down: %d Retry-After %q %s", i, resp.StatusCode, resp.Header.Get("Retry-After"), body)
		}
	}
	if v, ok := s.metric(t, `sluice_store_degraded_decisions_total{on_error="closed"}`); !ok || v < 4 {
		t.Fatalf(`sluice_store_degraded_decisions_total{on_error="closed"} = %v (exported: %v), want >= 4`, v, ok)
	}
	if v, _ := s.metric(t, `sluice_decisions_total{decision="denied",policy="api"}`); v < 4 {
		t.Errorf("denied decisions of api = %v, want >= 4", v)
	}

	conn, err := grpc.NewClient(s.srv.grpcAddr.String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rls := rlsv3.NewRateLimitServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	// gRPC health agrees with /readyz: Envoy's health checks keep sending.
	if st, err := healthFrom("127.0.0.1", s.grpcAddr()); err != nil || st != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("gRPC health with Redis down: %v %v; want SERVING, as /readyz", st, err)
	}
	req := &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*commonv3.RateLimitDescriptor{
		{Entries: []*commonv3.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "10.0.0.1"}}},
	}}
	for i := range 3 {
		resp, err := rls.ShouldRateLimit(ctx, req)
		if err != nil {
			t.Fatalf("RLS request %d with Redis down: %v, want OVER_LIMIT", i, err)
		}
		if resp.OverallCode != rlsv3.RateLimitResponse_OVER_LIMIT || len(resp.Statuses) != 1 ||
			resp.Statuses[0].Code != rlsv3.RateLimitResponse_OVER_LIMIT {
			t.Fatalf("RLS request %d with Redis down: %v", i, resp)
		}
	}

	// Back to normal once Redis is.
	r.Restart()
	testwait.Within(t, recoverWithin, "/v1/check allowed on Redis again", func() (bool, string) {
		resp, c, body := s.check(t, "bob")
		return resp.StatusCode == 200 && c.Allowed && len(c.Checks) == 1 && !c.Checks[0].Degraded, body
	})
	resp, err := rls.ShouldRateLimit(ctx, req)
	if err != nil || resp.OverallCode != rlsv3.RateLimitResponse_OK {
		t.Fatalf("RLS request after recovery: %v %v", resp, err)
	}
}

// TestServeFailLocalWhileRedisIsDown: with on_error local and nodes 2, a
// limit of 10 admits 5 per key on this node while Redis is down (each of
// the two nodes gets half), every decision marked degraded.
func TestServeFailLocalWhileRedisIsDown(t *testing.T) {
	r := deadRedis(t)
	s := startServe(t, storeConfig(r.URL(), "local", "nodes: 2"))

	admitted := 0
	for i := range 12 {
		resp, c, body := s.check(t, "alice")
		if len(c.Checks) != 1 || !c.Checks[0].Degraded || resp.StatusCode != map[bool]int{true: 200, false: 429}[c.Allowed] {
			t.Fatalf("check %d with Redis down: %d %s", i, resp.StatusCode, body)
		}
		if c.Allowed {
			admitted++
		}
	}
	if admitted != 5 {
		t.Fatalf("%d of 12 admitted locally, want 5 (limit 10 over 2 nodes)", admitted)
	}
	// Another key has its own local budget.
	if resp, c, body := s.check(t, "bob"); resp.StatusCode != 200 || !c.Allowed || !c.Checks[0].Degraded {
		t.Fatalf("another key with Redis down: %d %s", resp.StatusCode, body)
	}
	if v, ok := s.metric(t, `sluice_store_degraded_decisions_total{on_error="local"}`); !ok || v < 13 {
		t.Fatalf(`sluice_store_degraded_decisions_total{on_error="local"} = %v (exported: %v), want >= 13`, v, ok)
	}
	if code, rd, body := s.storeReady(t); code != 503 || rd.Store.OnError != "local" {
		t.Fatalf("/readyz/store with Redis down: %d %s", code, body)
	}
	s.expectDegraded(t, "local")
}
