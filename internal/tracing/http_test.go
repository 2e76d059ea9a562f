package tracing_test

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/httpapi"
	"github.com/sluicehq/sluice/internal/tracing"
)

func TestHTTPCheckSpans(t *testing.T) {
	svc, rec := traced(t, memoryStack, false)
	srv := httptest.NewServer(httpapi.New(svc))
	defer srv.Close()
	body := `{"checks":[{"policy":"per_user","key":"` + secretKey + `"},{"policy":"per_user_shadow","key":"` + secretKey + `"}]}`
	for i, want := range []struct {
		status  int
		outcome string
		allowed bool
	}{
		{200, tracing.OutcomeAllowed, true},
		{200, tracing.OutcomeShadow, true}, // the shadow policy's limit is 1
		{429, tracing.OutcomeDenied, false},
	} {
		rec.Reset()
		if got := check(t, srv, body); got != want.status {
			t.Fatalf("check %d: status %d, want %d", i, got, want.status)
		}
		spans := rec.Ended()
		front, store := byName(t, spans, "POST /v1/check")
		wantChildOfClient(t, front)
		wantAttr(t, front, "http.response.status_code", int64(want.status))
		wantAttr(t, front, tracing.KeyPolicies, "per_user,per_user_shadow")
		wantAttr(t, front, tracing.KeyChecks, int64(2))
		wantAttr(t, front, tracing.KeyOutcome, want.outcome)
		wantAttr(t, front, tracing.KeyAllowed, want.allowed)
		if _, ok := attr(front, tracing.KeyDegraded); ok {
			t.Errorf("check %d: marked degraded on the memory store", i)
		}
		// The enforced policy, then the shadow one: a store call each.
		if len(store) != 2 {
			t.Fatalf("check %d: %d store spans, want 2", i, len(store))
		}
		for _, s := range store {
			wantChildOf(t, s, front)
			wantAttr(t, s, tracing.KeyChecks, int64(1))
		}
		noKeys(t, spans, secretKey)
	}
}

func TestHTTPCheckKeysWhenAsked(t *testing.T) {
	svc, rec := traced(t, memoryStack, true)
	srv := httptest.NewServer(httpapi.New(svc))
	defer srv.Close()
	if got := check(t, srv, `{"policy":"per_user","key":"`+secretKey+`"}`); got != 200 {
		t.Fatalf("status %d", got)
	}
	front, store := byName(t, rec.Ended(), "POST /v1/check")
	wantAttr(t, front, tracing.KeyKeys, secretKey)
	for _, s := range store {
		wantAttr(t, s, tracing.KeyKeys, secretKey)
	}
}

func TestHTTPBadRequestSpan(t *testing.T) {
	svc, rec := traced(t, memoryStack, false)
	srv := httptest.NewServer(httpapi.New(svc))
	defer srv.Close()
	if got := check(t, srv, `{"policy":"nope","key":"`+secretKey+`"}`); got != 404 {
		t.Fatalf("status %d, want 404", got)
	}
	front, store := byName(t, rec.Ended(), "POST /v1/check")
	wantAttr(t, front, "http.response.status_code", int64(404))
	if front.Status().Code == codes.Error || len(store) != 0 {
		t.Errorf("a client's mistake: status %v, %d store calls; want no error and no store call", front.Status(), len(store))
	}
}

// TestHTTPInvalidCheckSpan: a check the store refuses (an empty key) is the
// client's mistake: its cause is recorded, but it is no error of the span.
func TestHTTPInvalidCheckSpan(t *testing.T) {
	svc, rec := traced(t, memoryStack, false)
	srv := httptest.NewServer(httpapi.New(svc))
	defer srv.Close()
	if got := check(t, srv, `{"policy":"per_user","key":""}`); got != 400 {
		t.Fatalf("status %d, want 400", got)
	}
	front, _ := byName(t, rec.Ended(), "POST /v1/check")
	wantAttr(t, front, tracing.KeyErrorType, "invalid_check")
	wantAttr(t, front, tracing.KeyOutcome, tracing.OutcomeError)
	wantAttr(t, front, tracing.KeyPolicies, "per_user")
	if front.Status().Code == codes.Error {
		t.Errorf("status %v: a client's mistake marked as the server's error", front.Status())
	}
}

// deadRedis returns a redis:// URL where nothing listens.
func deadRedis(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "redis://" + addr
}

// TestDegradedSpans: with Redis down the fail policy decides, and both the
// request's span and the store's say so, and which policy it was — also
// with leases over the fail policy.
func TestDegradedSpans(t *testing.T) {
	for _, c := range []struct {
		onError string
		status  int
		allowed bool
		lease   *config.Lease
	}{{"local", 200, true, nil}, {"open", 200, true, nil}, {"closed", 503, false, nil},
		{"local", 200, true, &config.Lease{}}, {"closed", 503, false, &config.Lease{}}} {
		t.Run(fmt.Sprintf("%s/lease=%v", c.onError, c.lease != nil), func(t *testing.T) {
			svc, rec := traced(t, openStack(t, config.Store{URL: deadRedis(t), OnError: c.onError, Lease: c.lease}), false)
			srv := httptest.NewServer(httpapi.New(svc))
			defer srv.Close()
			if got := check(t, srv, `{"policy":"per_user","key":"`+secretKey+`"}`); got != c.status {
				t.Fatalf("status %d, want %d", got, c.status)
			}
			spans := rec.Ended()
			front, store2 := byName(t, spans, "POST /v1/check")
			if len(store2) != 1 {
				t.Fatalf("%d store spans, want 1", len(store2))
			}
			for _, s := range []sdktrace.ReadOnlySpan{front, store2[0]} {
				wantAttr(t, s, tracing.KeyDegraded, true)
				wantAttr(t, s, tracing.KeyFailPolicy, c.onError)
				wantAttr(t, s, tracing.KeyAllowed, c.allowed)
			}
			if c.onError == "closed" {
				if front.Status().Code != codes.Error || store2[0].Status().Code != codes.Error {
					t.Errorf("failing closed: statuses %v, %v; want errors", front.Status(), store2[0].Status())
				}
				wantAttr(t, store2[0], tracing.KeyErrorType, "unavailable")
			}
			noKeys(t, spans, secretKey)
		})
	}
}

// TestHTTPNotSampled: a caller whose traceparent says "not sampled" gets its
// answer, and no span is recorded (the default sampler follows the parent).
func TestHTTPNotSampled(t *testing.T) {
	svc, rec := traced(t, memoryStack, false)
	srv := httptest.NewServer(httpapi.New(svc))
	defer srv.Close()
	req, err := http.NewRequest("POST", srv.URL+"/v1/check", strings.NewReader(`{"policy":"per_user","key":"k"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("traceparent", "00-"+parentTrace+"-"+parentSpan+"-00")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if spans := rec.Ended(); len(spans) != 0 {
		t.Errorf("%d spans recorded for a request its caller did not sample", len(spans))
	}
}
