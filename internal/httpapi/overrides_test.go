package httpapi_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/httpapi"
	"github.com/sluicehq/sluice/internal/overrides"
	"github.com/sluicehq/sluice/internal/service"
	"github.com/sluicehq/sluice/internal/storestack"
	"github.com/sluicehq/sluice/memory"
	"github.com/sluicehq/sluice/storetest"
)

// do sends method path with body and the admin token; it returns the status
// and the decoded JSON.
func (e *env) do(method, path, body, token string) (int, map[string]any) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.url+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		e.t.Fatalf("%s %s: %q is not JSON", method, path, raw)
	}
	return resp.StatusCode, out
}

func newOverrideEnv(t *testing.T) *env {
	clock := storetest.NewClock(storetest.Epoch)
	ov := overrides.NewMemory(overrides.WithClock(clock), overrides.WithLogger(slog.New(slog.DiscardHandler)))
	svc := service.New(storestack.Of(memory.New(memory.WithClock(clock))), testConfig(testPolicies...), service.WithOverrides(ov))
	srv := httptest.NewServer(httpapi.New(svc, httpapi.WithAdminToken("s3cret")))
	t.Cleanup(srv.Close)
	return &env{t: t, url: srv.URL, clock: clock, svc: svc}
}

func TestOverridesAPI(t *testing.T) {
	e := newOverrideEnv(t)
	const tok = "s3cret"
	if code, _ := e.do("PUT", "/v1/admin/overrides/per_user", `{"key":"a","limit":5}`, "wrong"); code != 401 {
		t.Fatalf("wrong token: %d", code)
	}
	if code, _ := e.do("GET", "/v1/admin/overrides", ``, ""); code != 401 {
		t.Fatalf("no token: %d", code)
	}
	code, body := e.do("PUT", "/v1/admin/overrides/per_user", `{"prefix":"acme:","limit":5,"ttl":"1h","reason":"trial"}`, tok)
	if code != 200 || body["prefix"] != "acme:" || body["limit"] != 5.0 || body["period"] != "1m0s" || body["reason"] != "trial" ||
		body["expires_at"] != storetest.Epoch.Add(3600e9).UTC().Format("2006-01-02T15:04:05Z07:00") {
		t.Fatalf("PUT: %d %v", code, body)
	}
	if _, b := e.post("/v1/check", `{"policy":"per_user","key":"acme:1","cost":5}`); !b.Allowed || b.Checks[0].Limit != 5 {
		t.Fatalf("check under the override: %+v", b)
	}
	if _, b := e.post("/v1/check", `{"policy":"per_user","key":"other","cost":4}`); b.Error == nil {
		t.Fatalf("cost 4 above the policy's 3 was accepted: %+v", b)
	}
	code, body = e.do("GET", "/v1/admin/overrides/per_user", ``, tok)
	if list, _ := body["overrides"].([]any); code != 200 || len(list) != 1 {
		t.Fatalf("GET: %d %v", code, body)
	}
	if code, body = e.do("GET", "/v1/admin/overrides/global", ``, tok); code != 200 || len(body["overrides"].([]any)) != 0 {
		t.Fatalf("GET another policy: %d %v", code, body)
	}
	for _, c := range []struct {
		path, body, code, field string
	}{
		{"/v1/admin/overrides/nope", `{"key":"a","limit":1}`, "unknown_policy", "policy"},
		{"/v1/admin/overrides/per_user", `{"key":"a","prefix":"b","limit":1}`, "invalid_override", "key"},
		{"/v1/admin/overrides/per_user", `{"limit":1}`, "invalid_override", "key"},
		{"/v1/admin/overrides/per_user", `{"key":"a","limit":0}`, "invalid_override", "limit"},
		{"/v1/admin/overrides/per_user", `{"key":"a","limit":1,"burst":2}`, "invalid_override", "burst"},
		{"/v1/admin/overrides/per_user", `{"key":"a","limit":1,"period":"soon"}`, "invalid_override", "period"},
		{"/v1/admin/overrides/per_user", `{"key":"a","limit":1,"ttl":"-1s"}`, "invalid_override", "ttl"},
		{"/v1/admin/overrides/per_user", `{"key":"a","limit":1,"ttl":"1h","expires_at":"2200-01-01T00:00:00Z"}`, "invalid_override", "ttl"},
		{"/v1/admin/overrides/per_user", `{"key":"a","limit":1,"expires_at":"2000-01-01T00:00:00Z"}`, "invalid_override", "expires_at"},
		{"/v1/admin/overrides/per_user", `{"key":"a","limit":1,"Limit":2}`, "malformed_json", ""},
		{"/v1/admin/overrides/per_user", `{"key":"a","limit":1,"limit":2}`, "malformed_json", ""},
		{"/v1/admin/overrides/per_user", `{"key":"a","limit":"1"}`, "malformed_json", ""},
	} {
		code, body := e.do("PUT", c.path, c.body, tok)
		errObj, _ := body["error"].(map[string]any)
		if code/100 != 4 || errObj == nil || errObj["code"] != c.code || (c.field != "" && errObj["field"] != c.field) {
			t.Errorf("PUT %s %s: %d %v, want %s on %q", c.path, c.body, code, body, c.code, c.field)
		}
	}
	if code, _ := e.do("DELETE", "/v1/admin/overrides/per_user?key=acme:", ``, tok); code != 404 {
		t.Errorf("deleting a key override that is a prefix one: %d", code)
	}
	if code, _ := e.do("DELETE", "/v1/admin/overrides/per_user", ``, tok); code != 400 {
		t.Errorf("DELETE without a target: %d", code)
	}
	if code, body := e.do("DELETE", "/v1/admin/overrides/per_user?prefix=acme:", ``, tok); code != 200 || body["deleted"] != true {
		t.Errorf("DELETE: %d %v", code, body)
	}
	if _, b := e.post("/v1/check", `{"policy":"per_user","key":"acme:1","cost":0}`); b.Checks[0].Limit != 3 {
		t.Errorf("after DELETE the policy's limit applies: %+v", b)
	}
	// Expiry: an override set with a ttl stops applying when it ends.
	e.do("PUT", "/v1/admin/overrides/global", `{"key":"k","limit":50,"ttl":"1s"}`, tok)
	if _, b := e.post("/v1/check", `{"policy":"global","key":"k","cost":0}`); b.Checks[0].Limit != 50 {
		t.Errorf("before expiry: %+v", b)
	}
	e.clock.Advance(1e9)
	if _, b := e.post("/v1/check", `{"policy":"global","key":"k","cost":0}`); b.Checks[0].Limit != 5 {
		t.Errorf("after expiry: %+v", b)
	}
}

// TestCheckPlan: a check's plan picks the policy's plan limit.
func TestCheckPlan(t *testing.T) {
	plans := policy("tiered", sluice.FixedWindow, 1, time.Minute)
	plans.Plans = &config.Plans{Default: "free", Limits: map[string]config.PlanLimit{
		"free": {Limit: 2, Period: time.Minute}, "pro": {Limit: 5, Period: time.Minute}},
		From: config.PlanSource{Header: "X-Plan"}}
	clock := storetest.NewClock(storetest.Epoch)
	svc := service.New(storestack.Of(memory.New(memory.WithClock(clock))), testConfig(plans))
	srv := httptest.NewServer(httpapi.New(svc))
	t.Cleanup(srv.Close)
	e := &env{t: t, url: srv.URL, clock: clock, svc: svc}
	if resp, b := e.post("/v1/check", `{"policy":"tiered","key":"a","plan":"pro","cost":5}`); !b.Allowed || b.Checks[0].Limit != 5 ||
		resp.Header.Get("RateLimit-Policy") != `"tiered";q=5;w=60` {
		t.Errorf("pro: %+v %q", b, resp.Header.Get("RateLimit-Policy"))
	}
	if _, b := e.post("/v1/check", `{"checks":[{"policy":"tiered","key":"b","cost":0}]}`); b.Checks[0].Limit != 2 {
		t.Errorf("no plan: %+v, want the default plan's 2", b)
	}
	if resp, _ := e.post("/v1/check", `{"policy":"tiered","key":"a","plan":"pro","plan":"free"}`); resp.StatusCode != 400 {
		t.Errorf("a plan given twice: %d", resp.StatusCode)
	}
	// GET /v1/policies lists the plans, the default and where they come from.
	var list struct {
		Policies []struct {
			Name  string
			Plans struct {
				Default string
				From    map[string]string
				Limits  map[string]struct {
					Limit    int64
					Period   string
					PeriodMS int64 `json:"period_ms"`
				}
			}
		}
	}
	if err := json.Unmarshal([]byte(e.get("/v1/policies")), &list); err != nil {
		t.Fatal(err)
	}
	pl := list.Policies[0].Plans
	if pl.Default != "free" || pl.From["header"] != "X-Plan" || len(pl.Limits) != 2 ||
		pl.Limits["pro"].Limit != 5 || pl.Limits["pro"].Period != "1m0s" || pl.Limits["free"].PeriodMS != 60000 {
		t.Errorf("policies: %+v", list.Policies)
	}
}
