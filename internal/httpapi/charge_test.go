package httpapi_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/httpapi"
	"github.com/sluicehq/sluice/internal/service"
	"github.com/sluicehq/sluice/internal/storestack"
	"github.com/sluicehq/sluice/memory"
	"github.com/sluicehq/sluice/storetest"

	"net/http/httptest"
)

type chargeBody struct {
	Policy       string `json:"policy"`
	Key          string `json:"key"`
	Fitted       bool   `json:"fitted"`
	Limit        int64  `json:"limit"`
	Remaining    int64  `json:"remaining"`
	RetryAfterMS int64  `json:"retry_after_ms"`
	ResetAfterMS int64  `json:"reset_after_ms"`
	Error        *struct {
		Code, Message, Field string
	} `json:"error"`
}

// charge posts body to /v1/charge and decodes the answer.
func (e *env) charge(body string) (int, chargeBody) {
	e.t.Helper()
	resp, err := http.Post(e.url+"/v1/charge", "application/json", strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out chargeBody
	if err := json.Unmarshal(raw, &out); err != nil {
		e.t.Fatalf("POST /v1/charge %s: body %q is not JSON: %v", body, raw, err)
	}
	return resp.StatusCode, out
}

// newChargeEnv serves the API over a memory store on a fake clock 15 s into
// a minute, with a fixed window of 10 a minute and a token bucket of 10 a
// second.
func newChargeEnv(t *testing.T) *env {
	clock := storetest.NewClock(storetest.Epoch.Add(15 * time.Second))
	svc := service.New(storestack.Of(memory.New(memory.WithClock(clock))), testConfig(
		policy("tokens", sluice.FixedWindow, 10, time.Minute),
		policy("bucket", sluice.TokenBucket, 10, time.Second)))
	srv := httptest.NewServer(httpapi.New(svc))
	t.Cleanup(srv.Close)
	return &env{t: t, url: srv.URL, clock: clock, svc: svc}
}

// TestChargeFixedWindow: on a fixed window of 10 a minute, a charge of 15
// answers remaining −5, and the next check is 429 with a Retry-After at the
// window's end; once the window is over the key is admitted again.
func TestChargeFixedWindow(t *testing.T) {
	e := newChargeEnv(t)
	status, c := e.charge(`{"policy":"tokens","key":"alice","cost":15}`)
	want := chargeBody{Policy: "tokens", Key: "alice", Limit: 10, Remaining: -5, RetryAfterMS: 45000, ResetAfterMS: 45000}
	if status != 200 || c != want {
		t.Fatalf("charge of 15: %d %+v, want 200 %+v", status, c, want)
	}
	resp, body := e.post("/v1/check", `{"policy":"tokens","key":"alice"}`)
	if resp.StatusCode != 429 || body.Allowed || resp.Header.Get("Retry-After") != "45" {
		t.Fatalf("check after the charge: %d %+v Retry-After %q, want 429 and 45 (the window's end)",
			resp.StatusCode, body, resp.Header.Get("Retry-After"))
	}
	if resp, body := e.post("/v1/check", `{"policy":"tokens","key":"bob"}`); resp.StatusCode != 200 || body.Checks[0].Remaining != 9 {
		t.Fatalf("another key: %d %+v", resp.StatusCode, body)
	}
	e.clock.Advance(45 * time.Second)
	if resp, body := e.post("/v1/check", `{"policy":"tokens","key":"alice"}`); resp.StatusCode != 200 || body.Checks[0].Remaining != 9 {
		t.Fatalf("check in the next window: %d %+v, want 200 with 9 left", resp.StatusCode, body)
	}
	// A charge that fits is what a decision would have admitted.
	if status, c := e.charge(`{"policy":"tokens","key":"alice","cost":4}`); status != 200 || !c.Fitted || c.Remaining != 5 {
		t.Fatalf("a charge that fits: %d %+v", status, c)
	}
}

// TestChargeTokenBucket: a token bucket of 10 a second charged 15 owes 5
// and repays them at its rate: one unit is admitted 600 ms later, not
// before.
func TestChargeTokenBucket(t *testing.T) {
	e := newChargeEnv(t)
	if status, c := e.charge(`{"policy":"bucket","key":"k","cost":15}`); status != 200 || c.Remaining != -5 || c.RetryAfterMS != 600 {
		t.Fatalf("charge of 15: %d %+v, want remaining -5, retry after 600 ms", status, c)
	}
	e.clock.Advance(300 * time.Millisecond)
	if status, c := e.charge(`{"policy":"bucket","key":"k","cost":0}`); status != 200 || c.Remaining != -2 || c.RetryAfterMS != 300 {
		t.Fatalf("300 ms later: %d %+v, want remaining -2 (3 repaid), retry after 300 ms", status, c)
	}
	if resp, body := e.post("/v1/check", `{"policy":"bucket","key":"k"}`); resp.StatusCode != 429 || body.RetryAfterMS != 300 {
		t.Fatalf("check while owing: %d %+v", resp.StatusCode, body)
	}
	e.clock.Advance(300 * time.Millisecond)
	if resp, body := e.post("/v1/check", `{"policy":"bucket","key":"k"}`); resp.StatusCode != 200 || body.Checks[0].Remaining != 0 {
		t.Fatalf("once repaid: %d %+v, want 200 with 0 left", resp.StatusCode, body)
	}
}

// TestChargeBadRequests: the same strict decoding and bounds as /v1/check,
// and a charge's own rules (a cost is required, never negative).
func TestChargeBadRequests(t *testing.T) {
	e := newChargeEnv(t)
	for _, c := range []struct {
		body   string
		status int
		code   string
		field  string
	}{
		{`{"policy":"tokens","key":"a"}`, 400, "invalid_request", "cost"},
		{`{"key":"a","cost":1}`, 400, "invalid_request", "policy"},
		{`{"policy":"nope","key":"a","cost":1}`, 404, "unknown_policy", "policy"},
		{`{"policy":"tokens","key":"a","cost":-1}`, 400, "invalid_check", "cost"},
		{`{"policy":"tokens","key":"","cost":1}`, 400, "invalid_check", "key"},
		{`{"policy":"tokens","key":"a","cost":1,"extra":1}`, 400, "malformed_json", ""},
		{`{"policy":"tokens","key":"a","cost":1.5}`, 400, "malformed_json", ""},
		{`{"policy":"tokens","key":"a","cost":1} x`, 400, "malformed_json", ""},
		{`{"policy":"tokens","key":"` + strings.Repeat("k", 70000) + `","cost":1}`, 413, "body_too_large", ""},
	} {
		status, got := e.charge(c.body)
		if status != c.status || got.Error == nil || got.Error.Code != c.code || got.Error.Field != c.field {
			t.Errorf("%.60s: %d %+v, want %d %s field %q", c.body, status, got.Error, c.status, c.code, c.field)
		}
	}
	if resp, body := e.post("/v1/check", `{"policy":"tokens","key":"a","cost":0}`); body.Checks[0].Remaining != 10 {
		t.Fatalf("a refused charge consumed: %d %+v", resp.StatusCode, body)
	}
}
