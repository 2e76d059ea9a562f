package envoyrls

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/sluicehq/sluice/internal/service"
	"github.com/sluicehq/sluice/internal/storestack"
)

// postJSON posts body to url and returns the status and the body.
func postJSON(t testing.TB, url, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestJSONHandler: envoyproxy/ratelimit's /json endpoint takes a
// RateLimitRequest in JSON and answers the RateLimitResponse, decided as over
// gRPC: 200 when OK, 429 when OVER_LIMIT; what is not a request is a 400
// saying why.
func TestJSONHandler(t *testing.T) {
	e := newEnv(t, openMemory, newConfig(domain("d", node("k", "", limits(pol("one", 1, time.Minute))))))
	srv := httptest.NewServer(e.srv.JSONHandler())
	t.Cleanup(srv.Close)
	req := `{"domain": "d", "descriptors": [{"entries": [{"key": "k", "value": "v"}]}]}`
	for i, want := range []struct {
		status int
		code   rlsv3.RateLimitResponse_Code
		left   uint32
	}{{http.StatusOK, codeOK, 0}, {http.StatusTooManyRequests, codeOverLimit, 0}} {
		code, body := postJSON(t, srv.URL, req)
		var resp rlsv3.RateLimitResponse
		if err := protojson.Unmarshal([]byte(body), &resp); err != nil || code != want.status {
			t.Fatalf("request %d: %d %q (%v)", i, code, body, err)
		}
		if resp.OverallCode != want.code || len(resp.Statuses) != 1 || resp.Statuses[0].CurrentLimit.GetName() != "one" ||
			resp.Statuses[0].DurationUntilReset.AsDuration() != 45*time.Second {
			t.Fatalf("request %d: %v", i, &resp)
		}
	}
	// The gRPC API sees the same count.
	checkStatuses(t, e.call("d", 0, desc("k", "v")), codeOverLimit, over("one", 0))
	for _, c := range []struct {
		body   string
		status int
		says   string
	}{
		{`{"domain": "d"`, http.StatusBadRequest, "not a RateLimitRequest"},
		{`{"domain": "d", "descriptors": [], "extra": 1}`, http.StatusBadRequest, "extra"},
		{`{"domain": "", "descriptors": [{"entries": [{"key": "k", "value": "v"}]}]}`, http.StatusBadRequest, "domain must not be empty"},
		{`{"domain": "d"}`, http.StatusBadRequest, "descriptor list must not be empty"},
		{`{"domain": "` + strings.Repeat("x", maxJSONBody) + `"}`, http.StatusRequestEntityTooLarge, "64 KiB"},
	} {
		if code, body := postJSON(t, srv.URL, c.body); code != c.status || !strings.Contains(body, c.says) {
			t.Errorf("%.40q: %d %q, want %d saying %q", c.body, code, body, c.status, c.says)
		}
	}
	// A store that cannot decide (and no fail policy that does) is a 503.
	down := httptest.NewServer(New(service.New(storestack.Of(failingStore{}), e.svc.Config(), service.WithLogger(quiet))).JSONHandler())
	t.Cleanup(down.Close)
	if code, body := postJSON(t, down.URL, req); code != http.StatusServiceUnavailable {
		t.Fatalf("store down: %d %q", code, body)
	}
}

// FuzzJSONHandler: whatever the body, /json answers 200 or 429 with a
// response, or 400 / 413 with a reason; never a 5xx, never a panic.
func FuzzJSONHandler(f *testing.F) {
	e := newFuzzEnv(f, WithDynamicMetadata(true), WithLimitHeaders(DefaultLimitHeaderNames))
	h := e.srv.JSONHandler()
	for _, seed := range []string{
		`{"domain": "edge", "descriptors": [{"entries": [{"key": "remote_address", "value": "10.0.0.1"}]}]}`,
		`{"domain": "edge", "hitsAddend": 3, "descriptors": [{"entries": [{"key": "k"}], "hitsAddend": "0"}]}`,
		`{"domain": "edge", "descriptors": [{"entries": [{"key": "k", "value": "v"}], "limit": {"requestsPerUnit": 2, "unit": "MINUTE"}}]}`,
		`{"domain": "x", "descriptors": [{}]}`,
		`{"domain": 1}`, `[]`, ``, `null`, "{\"domain\": \"\xff\"}",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/json", strings.NewReader(body)))
		switch w.Code {
		case http.StatusOK, http.StatusTooManyRequests:
			var resp rlsv3.RateLimitResponse
			if err := protojson.Unmarshal(w.Body.Bytes(), &resp); err != nil {
				t.Fatalf("%d with a body that is not a response: %q", w.Code, w.Body.String())
			}
			if (w.Code == http.StatusTooManyRequests) != (resp.OverallCode == codeOverLimit) {
				t.Fatalf("status %d for overall_code %v", w.Code, resp.OverallCode)
			}
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
			if w.Body.Len() == 0 {
				t.Fatalf("%d without a reason", w.Code)
			}
		default:
			t.Fatalf("status %d for %q: %q", w.Code, body, w.Body.String())
		}
	})
}
