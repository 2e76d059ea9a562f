package httpapi_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/httpapi"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/service"
	"github.com/sluicehq/sluice/internal/storestack"
	"github.com/sluicehq/sluice/memory"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/storetest"
)

// testConfig builds a Config holding ps.
func testConfig(ps ...config.Policy) *config.Config {
	cfg := &config.Config{Policies: map[string]*config.Policy{}}
	for i := range ps {
		cfg.Policies[ps[i].Name] = &ps[i]
	}
	return cfg
}

func policy(name string, alg sluice.Algorithm, limit int64, period time.Duration) config.Policy {
	return config.Policy{Policy: sluice.Policy{Name: name, Algorithm: alg, Limit: limit, Period: period}}
}

var testPolicies = []config.Policy{
	policy("per_user", sluice.FixedWindow, 3, time.Minute),
	policy("global", sluice.GCRA, 5, time.Second),
	policy("bucket", sluice.TokenBucket, 10, time.Second),
	{Policy: sluice.Policy{Name: "shadowed", Algorithm: sluice.FixedWindow, Limit: 1, Period: time.Minute}, Shadow: true},
}

type env struct {
	t     *testing.T
	url   string
	clock *storetest.Clock
	svc   *service.Service
}

func newEnv(t *testing.T, store sluice.Store, clock *storetest.Clock, opts ...httpapi.Option) *env {
	t.Helper()
	svc := service.New(storestack.Of(store), testConfig(testPolicies...))
	srv := httptest.NewServer(httpapi.New(svc, opts...))
	t.Cleanup(srv.Close)
	return &env{t: t, url: srv.URL, clock: clock, svc: svc}
}

func newMemoryEnv(t *testing.T, opts ...httpapi.Option) *env {
	clock := storetest.NewClock(storetest.Epoch)
	return newEnv(t, memory.New(memory.WithClock(clock)), clock, opts...)
}

type checkResult struct {
	Policy       string `json:"policy"`
	Key          string `json:"key"`
	Allowed      bool   `json:"allowed"`
	Shadow       bool   `json:"shadow"`
	Limit        int64  `json:"limit"`
	Remaining    int64  `json:"remaining"`
	RetryAfterMS int64  `json:"retry_after_ms"`
	ResetAfterMS int64  `json:"reset_after_ms"`
	DelayMS      int64  `json:"delay_ms"`
}

type checkBody struct {
	Allowed      bool          `json:"allowed"`
	RetryAfterMS int64         `json:"retry_after_ms"`
	Checks       []checkResult `json:"checks"`
	Error        *struct {
		Code, Message, Field string
	} `json:"error"`
}

// post sends body to path and decodes the JSON answer strictly.
func (e *env) post(path, body string, header ...string) (*http.Response, checkBody) {
	e.t.Helper()
	req, err := http.NewRequest("POST", e.url+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out checkBody
	raw, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(raw, &out); err != nil {
		e.t.Fatalf("POST %s %s: body %q is not JSON: %v", path, body, raw, err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		e.t.Fatalf("Content-Type %q", ct)
	}
	return resp, out
}

func TestCheckBurstThenRetry(t *testing.T) {
	e := newMemoryEnv(t)
	for i := range 3 {
		resp, body := e.post("/v1/check", `{"policy":"per_user","key":"alice"}`)
		if resp.StatusCode != 200 || !body.Allowed || len(body.Checks) != 1 {
			t.Fatalf("request %d: %d %+v", i, resp.StatusCode, body)
		}
		c := body.Checks[0]
		want := checkResult{Policy: "per_user", Key: "alice", Allowed: true, Limit: 3, Remaining: int64(2 - i), ResetAfterMS: 60000}
		if c != want {
			t.Fatalf("request %d: %+v, want %+v", i, c, want)
		}
		if got := resp.Header.Get("RateLimit"); got != fmt.Sprintf(`"per_user";r=%d;t=60`, 2-i) {
			t.Fatalf("RateLimit %q", got)
		}
		if got := resp.Header.Get("RateLimit-Policy"); got != `"per_user";q=3;w=60` {
			t.Fatalf("RateLimit-Policy %q", got)
		}
		if resp.Header.Get("Retry-After") != "" {
			t.Fatal("Retry-After on an allowed answer")
		}
	}
	e.clock.Advance(20*time.Second + 300*time.Millisecond)
	resp, body := e.post("/v1/check", `{"policy":"per_user","key":"alice"}`)
	if resp.StatusCode != 429 || body.Allowed || body.Checks[0].Allowed {
		t.Fatalf("4th request: %d %+v", resp.StatusCode, body)
	}
	if body.RetryAfterMS != 39700 || body.Checks[0].RetryAfterMS != 39700 {
		t.Fatalf("retry_after_ms %d / %d, want 39700", body.RetryAfterMS, body.Checks[0].RetryAfterMS)
	}
	ra, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	if err != nil || ra != 40 {
		t.Fatalf("Retry-After %q, want 40 (39.7s rounded up)", resp.Header.Get("Retry-After"))
	}
	e.clock.Advance(time.Duration(body.RetryAfterMS) * time.Millisecond)
	if resp, body := e.post("/v1/check", `{"policy":"per_user","key":"alice"}`); resp.StatusCode != 200 {
		t.Fatalf("retry after retry_after_ms: %d %+v", resp.StatusCode, body)
	}
	// Another key is independent; a peek (cost 0) consumes nothing.
	for range 2 {
		if _, body := e.post("/v1/check", `{"policy":"per_user","key":"bob","cost":0}`); body.Checks[0].Remaining != 3 {
			t.Fatalf("peek: %+v", body)
		}
	}
}

func TestCheckAllOrNothing(t *testing.T) {
	e := newMemoryEnv(t)
	// Use up the global limit with another user.
	resp, body := e.post("/v1/check", `{"policy":"global","key":"all","cost":5}`)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %+v", resp.StatusCode, body)
	}
	batch := `{"checks":[{"policy":"per_user","key":"carol"},{"policy":"global","key":"all"}]}`
	resp, body = e.post("/v1/check", batch)
	if resp.StatusCode != 429 || body.Allowed || len(body.Checks) != 2 {
		t.Fatalf("%d %+v", resp.StatusCode, body)
	}
	if body.Checks[0].Remaining != 3 {
		t.Fatalf("the denied batch consumed per_user: %+v", body.Checks[0])
	}
	if body.RetryAfterMS != 200 || body.Checks[0].RetryAfterMS != 200 || body.Checks[1].RetryAfterMS != 200 {
		t.Fatalf("retry: %+v", body)
	}
	if got := resp.Header.Get("RateLimit-Policy"); got != `"per_user";q=3;w=60, "global";q=5;w=1` {
		t.Fatalf("RateLimit-Policy %q", got)
	}
	e.clock.Advance(200 * time.Millisecond)
	resp, body = e.post("/v1/check", batch)
	if resp.StatusCode != 200 || body.Checks[0].Remaining != 2 || body.Checks[1].Remaining != 0 {
		t.Fatalf("after the retry time: %d %+v", resp.StatusCode, body)
	}
}

func TestShadowNeverDenies(t *testing.T) {
	e := newMemoryEnv(t)
	for i := range 3 {
		resp, body := e.post("/v1/check", `{"policy":"shadowed","key":"k"}`)
		if resp.StatusCode != 200 || !body.Allowed || !body.Checks[0].Shadow {
			t.Fatalf("request %d: %d %+v", i, resp.StatusCode, body)
		}
		if wantAllowed := i == 0; body.Checks[0].Allowed != wantAllowed {
			t.Fatalf("request %d: the shadow verdict %v, want %v", i, body.Checks[0].Allowed, wantAllowed)
		}
		if resp.Header.Get("RateLimit") != "" {
			t.Fatal("a shadow policy is advertised in RateLimit")
		}
	}
	metrics := e.get("/metrics")
	for _, want := range []string{
		`sluice_decisions_total{decision="allowed",policy="shadowed"} 1`,
		`sluice_decisions_total{decision="shadow_denied",policy="shadowed"} 2`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

func (e *env) get(path string) string {
	e.t.Helper()
	resp, err := http.Get(e.url + path)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		e.t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	return string(b)
}

func TestBadRequests(t *testing.T) {
	e := newMemoryEnv(t, httpapi.WithMaxBodyBytes(1024), httpapi.WithMaxChecks(3))
	long := strings.Repeat("k", sluice.MaxKeyLen+1)
	cases := []struct {
		body   string
		status int
		code   string
		field  string
	}{
		{``, 400, "malformed_json", ""},
		{`{"policy":`, 400, "malformed_json", ""},
		{`{"policy":"per_user","key":"a"} {}`, 400, "malformed_json", ""},
		{`{"policy":"per_user","key":"a","extra":1}`, 400, "malformed_json", ""},
		{`{"policy":"per_user","key":"a","cost":"1"}`, 400, "malformed_json", ""},
		{`{}`, 400, "invalid_request", "policy"},
		{`{"key":"a"}`, 400, "invalid_request", "policy"},
		{`{"policy":"per_user","key":"a","checks":[]}`, 400, "invalid_request", "checks"},
		{`{"checks":[{},{},{},{}]}`, 400, "too_many_checks", "checks"},
		{`{"policy":"nope","key":"a"}`, 404, "unknown_policy", "policy"},
		{`{"checks":[{"policy":"global","key":"a"},{"policy":"nope","key":"a"}]}`, 404, "unknown_policy", "checks[1].policy"},
		{`{"policy":"per_user","key":""}`, 400, "invalid_check", "key"},
		{`{"policy":"per_user","key":"` + long[:900] + `"}`, 200, "", ""},
		{`{"policy":"per_user","key":"a","cost":-1}`, 400, "invalid_check", "cost"},
		{`{"policy":"per_user","key":"a","cost":4}`, 400, "invalid_check", "cost"},
		{`{"checks":[{"policy":"global","key":"a"},{"policy":"global","key":"a"}]}`, 400, "invalid_check", "checks[1].key"},
		{`{"policy":"per_user","key":"` + long + `"}`, 413, "body_too_large", ""},
	}
	for _, c := range cases {
		resp, body := e.post("/v1/check", c.body)
		if resp.StatusCode != c.status {
			t.Errorf("%.60s: status %d, want %d (%+v)", c.body, resp.StatusCode, c.status, body.Error)
			continue
		}
		if c.code == "" {
			continue
		}
		if body.Error == nil || body.Error.Code != c.code || body.Error.Field != c.field || body.Error.Message == "" {
			t.Errorf("%.60s: error %+v, want code %s field %q", c.body, body.Error, c.code, c.field)
		}
	}
	// A key over the maximum length, under the body cap.
	e2 := newMemoryEnv(t)
	if resp, body := e2.post("/v1/check", `{"policy":"per_user","key":"`+long+`"}`); resp.StatusCode != 400 || body.Error.Field != "key" {
		t.Errorf("long key: %d %+v", resp.StatusCode, body.Error)
	}
	// curl -d's default media type is fine; wrong method, unknown path are not.
	if resp, _ := e.post("/v1/check", `{"policy":"global","key":"form"}`, "Content-Type", "application/x-www-form-urlencoded"); resp.StatusCode != 200 {
		t.Errorf("form media type: %d", resp.StatusCode)
	}
	if resp, _ := http.Get(e.url + "/v1/check"); resp.StatusCode != 405 {
		t.Errorf("GET /v1/check: %d", resp.StatusCode)
	}
	if resp, _ := http.Get(e.url + "/v2/nothing"); resp.StatusCode != 404 {
		t.Errorf("unknown path: %d", resp.StatusCode)
	}
}

func TestPoliciesHealthMetrics(t *testing.T) {
	e := newMemoryEnv(t)
	var list struct {
		Policies []struct {
			Name, Algorithm, Period string
			Limit                   int64
			PeriodMS                int64 `json:"period_ms"`
			Shadow                  bool
		}
	}
	if err := json.Unmarshal([]byte(e.get("/v1/policies")), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Policies) != len(testPolicies) || list.Policies[0].Name != "bucket" || list.Policies[1].Name != "global" {
		t.Fatalf("policies: %+v", list.Policies)
	}
	if g := list.Policies[1]; g.Algorithm != "gcra" || g.Limit != 5 || g.PeriodMS != 1000 || g.Period != "1s" {
		t.Fatalf("global: %+v", g)
	}
	if !strings.Contains(e.get("/healthz"), "ok") || !strings.Contains(e.get("/readyz"), "ready") {
		t.Fatal("health")
	}
	e.post("/v1/check", `{"policy":"global","key":"x","cost":5}`)
	e.post("/v1/check", `{"policy":"global","key":"x"}`)
	m := e.get("/metrics")
	for _, want := range []string{
		`sluice_decisions_total{decision="allowed",policy="global"} 1`,
		`sluice_decisions_total{decision="denied",policy="global"} 1`,
		`sluice_decision_duration_seconds_count 2`,
		`sluice_store_errors_total{cause="timeout"} 0`,
		`sluice_build_info{goversion=`,
		`sluice_config_reloads_total{result="failure"} 0`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if strings.Contains(m, `"x"`) {
		t.Error("a key appears in the metrics")
	}
}

func TestAdminReset(t *testing.T) {
	off := newMemoryEnv(t)
	if resp, body := off.post("/v1/admin/reset", `{"policy":"per_user","key":"a"}`, "Authorization", "Bearer x"); resp.StatusCode != 404 {
		t.Fatalf("admin without a configured token: %d %+v", resp.StatusCode, body)
	}
	e := newMemoryEnv(t, httpapi.WithAdminToken("s3cret"))
	e.post("/v1/check", `{"policy":"per_user","key":"a","cost":3}`)
	for _, auth := range []string{"", "Bearer wrong", "s3cret", "Basic s3cret"} {
		resp, _ := e.post("/v1/admin/reset", `{"policy":"per_user","key":"a"}`, "Authorization", auth)
		if resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") == "" {
			t.Fatalf("Authorization %q: %d", auth, resp.StatusCode)
		}
	}
	if _, body := e.post("/v1/check", `{"policy":"per_user","key":"a","cost":0}`); body.Checks[0].Remaining != 0 {
		t.Fatalf("an unauthorized reset changed the state: %+v", body)
	}
	if resp, _ := e.post("/v1/admin/reset", `{"policy":"nope","key":"a"}`, "Authorization", "Bearer s3cret"); resp.StatusCode != 404 {
		t.Fatalf("unknown policy: %d", resp.StatusCode)
	}
	if resp, _ := e.post("/v1/admin/reset", `{"policy":"per_user","key":"a"}`, "Authorization", "Bearer s3cret"); resp.StatusCode != 200 {
		t.Fatalf("reset: %d", resp.StatusCode)
	}
	if _, body := e.post("/v1/check", `{"policy":"per_user","key":"a","cost":0}`); body.Checks[0].Remaining != 3 {
		t.Fatalf("after reset: %+v", body)
	}
}

// TestRedis runs the main flows against a real Redis, and readiness against
// a dead one.
func TestRedis(t *testing.T) {
	srv := redistest.Start(t)
	store, err := redisstore.Open(srv.URL(), redisstore.WithPrefix(fmt.Sprintf("httpapi%d:", time.Now().UnixNano())), redisstore.WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	e := newEnv(t, store, nil, httpapi.WithAdminToken("t"))
	for i := range 3 {
		if resp, body := e.post("/v1/check", `{"policy":"per_user","key":"alice"}`); resp.StatusCode != 200 || body.Checks[0].Remaining != int64(2-i) {
			t.Fatalf("request %d: %d %+v", i, resp.StatusCode, body)
		}
	}
	resp, body := e.post("/v1/check", `{"checks":[{"policy":"global","key":"g"},{"policy":"per_user","key":"alice"}]}`)
	if resp.StatusCode != 429 || body.Checks[0].Remaining != 5 || body.RetryAfterMS <= 0 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("batch: %d %+v", resp.StatusCode, body)
	}
	if resp, _ := e.post("/v1/admin/reset", `{"policy":"per_user","key":"alice"}`, "Authorization", "Bearer t"); resp.StatusCode != 200 {
		t.Fatalf("reset: %d", resp.StatusCode)
	}
	if resp, body := e.post("/v1/check", `{"policy":"per_user","key":"alice"}`); resp.StatusCode != 200 || body.Checks[0].Remaining != 2 {
		t.Fatalf("after reset: %d %+v", resp.StatusCode, body)
	}
	if !strings.Contains(e.get("/readyz"), "ready") {
		t.Fatal("readyz")
	}
	srv.Kill()
	// This store has no fail policy (it is not behind failover, as
	// storestack.Open puts it): with Redis down no check gets an answer,
	// so the node is not ready.
	for _, path := range []string{"/readyz", "/readyz/store"} {
		if code, b := getReady(t, e.url+path); code != 503 || b.Status != "unavailable" || b.Store.Ready || b.Store.OnError != "" {
			t.Fatalf("%s with Redis down and no fail policy: %d %+v", path, code, b)
		}
	}
	if resp, body := e.post("/v1/check", `{"policy":"per_user","key":"alice"}`); resp.StatusCode != 503 || body.Error.Code != "store_unavailable" {
		t.Fatalf("check with Redis down: %d %+v", resp.StatusCode, body)
	}
}
