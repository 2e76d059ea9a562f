package httpapi_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/httpapi"
	"github.com/sluicehq/sluice/internal/service"
	"github.com/sluicehq/sluice/internal/storestack"
	"github.com/sluicehq/sluice/memory"
	"github.com/sluicehq/sluice/storetest"
)

// slotEnv serves a concurrency policy "inflight" of 2 slots with a 30 s
// lease and a rate policy "rate", on a memory store with a fake clock.
func slotEnv(t *testing.T) *env {
	t.Helper()
	clock := storetest.NewClock(storetest.Epoch)
	cfg := testConfig(policy("inflight", sluice.Concurrency, 2, 30*time.Second), policy("rate", sluice.FixedWindow, 100, time.Minute))
	svc := service.New(storestack.Of(memory.New(memory.WithClock(clock))), cfg)
	srv := httptest.NewServer(httpapi.New(svc))
	t.Cleanup(srv.Close)
	return &env{t: t, url: srv.URL, clock: clock, svc: svc}
}

// acquire checks one slot of key and returns the status and its token.
func (e *env) acquire(key string) (int, string) {
	e.t.Helper()
	resp, raw := e.postRaw("/v1/check", `{"checks":[{"policy":"inflight","key":"`+key+`"},{"policy":"rate","key":"`+key+`"}]}`)
	var out struct {
		Checks []struct {
			ReleaseToken string `json:"release_token"`
		} `json:"checks"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || len(out.Checks) != 2 {
		e.t.Fatalf("check: %s: %v", raw, err)
	}
	if out.Checks[1].ReleaseToken != "" {
		e.t.Fatalf("a rate check got a release token: %s", raw)
	}
	return resp.StatusCode, out.Checks[0].ReleaseToken
}

// release posts body to /v1/release and returns the status and answer.
func (e *env) release(body string) (int, map[string]any) {
	e.t.Helper()
	resp, raw := e.postRaw("/v1/release", body)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		e.t.Fatalf("release %s: %s is not JSON", body, raw)
	}
	return resp.StatusCode, out
}

func (e *env) postRaw(path, body string) (*http.Response, []byte) {
	e.t.Helper()
	resp, err := http.Post(e.url+path, "application/json", strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp, raw
}

func releaseBody(key, token string) string {
	return `{"policy":"inflight","key":"` + key + `","release_token":"` + token + `"}`
}

// TestReleaseSlots: a concurrency check answers a release token; the third
// of 2 slots is denied; a wrong, foreign or reused token changes nothing
// and says so; the right one frees the slot once; an unreleased slot returns
// when its lease ends.
func TestReleaseSlots(t *testing.T) {
	e := slotEnv(t)
	var tokens []string
	for i := range 2 {
		status, token := e.acquire("k")
		if status != http.StatusOK || len(token) != 32 {
			t.Fatalf("acquisition %d: %d token %q", i, status, token)
		}
		tokens = append(tokens, token)
	}
	if status, token := e.acquire("k"); status != http.StatusTooManyRequests || token != "" {
		t.Fatalf("third: %d token %q, want 429 without a token", status, token)
	}
	for _, body := range []string{releaseBody("k", strings.Repeat("0", 32)), releaseBody("other", tokens[0])} {
		status, out := e.release(body)
		if status != http.StatusOK || out["released"] != false || out["message"] == nil {
			t.Fatalf("release %s: %d %v, want released false with a message", body, status, out)
		}
	}
	if status, _ := e.acquire("k"); status != http.StatusTooManyRequests {
		t.Fatalf("a wrong token freed a slot: %d", status)
	}
	if status, out := e.release(releaseBody("k", tokens[0])); status != http.StatusOK || out["released"] != true {
		t.Fatalf("release: %d %v", status, out)
	}
	if status, out := e.release(releaseBody("k", tokens[0])); status != http.StatusOK || out["released"] != false {
		t.Fatalf("reused token: %d %v, want released false", status, out)
	}
	status, token := e.acquire("k")
	if status != http.StatusOK {
		t.Fatalf("after the release: %d", status)
	}
	if status, _ := e.acquire("k"); status != http.StatusTooManyRequests {
		t.Fatalf("the reused token freed a second slot: %d", status)
	}
	_ = token // never released: its lease ends
	e.clock.Advance(30 * time.Second)
	for i := range 2 {
		if status, _ := e.acquire("k"); status != http.StatusOK {
			t.Fatalf("after the leases ended, acquisition %d: %d", i, status)
		}
	}
}

// TestReleaseBadRequests: every malformed release is a 400 (404 for an
// unknown policy) naming its field, and frees nothing.
func TestReleaseBadRequests(t *testing.T) {
	e := slotEnv(t)
	_, token := e.acquire("k")
	if _, second := e.acquire("k"); second == "" {
		t.Fatal("second slot not acquired")
	}
	for _, tc := range []struct {
		body, field string
		status      int
	}{
		{`{"key":"k","release_token":"` + token + `"}`, "policy", 400},
		{`{"policy":"nope","key":"k","release_token":"` + token + `"}`, "policy", 404},
		{`{"policy":"rate","key":"k","release_token":"` + token + `"}`, "policy", 400},
		{`{"policy":"inflight","release_token":"` + token + `"}`, "key", 400},
		{`{"policy":"inflight","key":"` + strings.Repeat("k", sluice.MaxKeyLen+1) + `","release_token":"` + token + `"}`, "key", 400},
		{`{"policy":"inflight","key":"k"}`, "release_token", 400},
		{releaseBody("k", token+"0000000"), "release_token", 400},
		{releaseBody("k", strings.ToUpper(token)), "release_token", 400},
		{`{"policy":"inflight","key":"k","release_token":"` + token + `","extra":1}`, "", 400},
		{`{"policy":"inflight","key":"k","release_token":7}`, "", 400},
	} {
		status, out := e.release(tc.body)
		errObj, _ := out["error"].(map[string]any)
		if status != tc.status || errObj == nil || errObj["message"] == "" || (tc.field != "" && errObj["field"] != tc.field) {
			t.Errorf("%s: %d %v, want %d naming %q", tc.body, status, out, tc.status, tc.field)
		}
	}
	if status, _ := e.acquire("k"); status != http.StatusTooManyRequests {
		t.Fatalf("a bad release freed a slot: %d", status)
	}
}
