package envoyrls

import (
	"fmt"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// The token quota scripts of envoyproxy/ratelimit (token-quota.sh and
// multiservice-tokenquota.sh) on its quota example: Envoy asks on the
// request path with hits_addend 0 (is there quota?) and charges on the
// response path with hits_addend 1 (what the request used). ratelimit adds
// every hits_addend to its counter, and a descriptor is OVER_LIMIT once the
// counter is past the limit, so a response's charge may leave a backend
// owing units and the next request-path check sees it over. These tests
// replay each script's calls against the serve path (service, engine,
// gRPC server) on memory and on Redis, and expect ratelimit's answers.

func TestTokenQuotaScriptMemory(t *testing.T) { testTokenQuotaScript(t, openMemory) }
func TestTokenQuotaScriptRedis(t *testing.T)  { testTokenQuotaScript(t, redisOpener(t)) }

func TestMultiserviceTokenQuotaScriptMemory(t *testing.T) {
	testMultiserviceTokenQuotaScript(t, openMemory)
}
func TestMultiserviceTokenQuotaScriptRedis(t *testing.T) {
	testMultiserviceTokenQuotaScript(t, redisOpener(t))
}

// testTokenQuotaScript: [service=service_2] (2 a minute) with hits_addend
// 0, 1, 0, 1, 0, 1, 0: the request path of requests 1 to 4 and the response
// path of 1 to 3. ratelimit answers OK to the first five calls; the third
// response's charge takes the counter to 3, past 2, so it is OVER_LIMIT, and
// so is the fourth request's check: the request is rejected, as the script
// expects. A minute later the quota is back.
func testTokenQuotaScript(t *testing.T, open opener) {
	e := newEnv(t, open, loadRatelimit(t, "tokenquota.yaml"))
	service2 := func() *rlsv3.RateLimitResponse { return e.call("quota", 0, withHits(desc("service", "service_2"), 0)) }
	charge2 := func() *rlsv3.RateLimitResponse { return e.call("quota", 0, withHits(desc("service", "service_2"), 1)) }
	steps := []struct {
		name string
		call func() *rlsv3.RateLimitResponse
		code rlsv3.RateLimitResponse_Code
		left uint32
	}{
		{"request 1", service2, codeOK, 2},
		{"response 1", charge2, codeOK, 1},
		{"request 2", service2, codeOK, 1},
		{"response 2", charge2, codeOK, 0},
		{"request 3", service2, codeOK, 0},
		{"response 3", charge2, codeOverLimit, 0},
		{"request 4", service2, codeOverLimit, 0},
	}
	for i, s := range steps {
		t.Run(fmt.Sprintf("%d %s", i+1, s.name), func(t *testing.T) {
			checkStatuses(t, s.call(), s.code, want{s.code, anonymous, s.left})
		})
	}
	e.clock.Advance(time.Minute)
	checkStatuses(t, service2(), codeOK, ok(anonymous, 2))
}

// testMultiserviceTokenQuotaScript: each request asks [service=service_1]
// and [service=service_2] with hits_addend 0, Envoy routes it to the first
// service with quota left, and the response charges that service 1. Service
// 1 (1 a minute) serves requests 1 and 2 (the counter is 1 when the second
// asks: not past the limit), service 2 (2 a minute) requests 3 to 5, and the
// sixth finds both past their limits: OVER_LIMIT. A minute later service 1
// serves again.
func testMultiserviceTokenQuotaScript(t *testing.T, open opener) {
	e := newEnv(t, open, loadRatelimit(t, "tokenquota.yaml"))
	ask := func() *rlsv3.RateLimitResponse {
		return e.call("quota", 0, withHits(desc("service", "service_1"), 0), withHits(desc("service", "service_2"), 0))
	}
	serve := func(service string) *rlsv3.RateLimitResponse {
		return e.call("quota", 0, withHits(desc("service", service), 1))
	}
	// route is the service Envoy forwards to: the first with quota.
	route := func(resp *rlsv3.RateLimitResponse) string {
		for i, st := range resp.Statuses {
			if st.Code == codeOK {
				return fmt.Sprintf("service_%d", i+1)
			}
		}
		return ""
	}
	for i, want := range []string{"service_1", "service_1", "service_2", "service_2", "service_2", ""} {
		resp := ask()
		if got := route(resp); got != want {
			t.Fatalf("request %d: routed to %q (%v), want %q", i+1, got, resp, want)
		}
		if want == "" {
			if resp.OverallCode != codeOverLimit {
				t.Fatalf("request %d: %v, want OVER_LIMIT with no quota left", i+1, resp)
			}
			break
		}
		if resp.OverallCode != codeOK {
			t.Fatalf("request %d: %v, want OK", i+1, resp)
		}
		serve(want)
	}
	e.clock.Advance(time.Minute)
	if resp := ask(); route(resp) != "service_1" || resp.OverallCode != codeOK {
		t.Fatalf("a minute later: %v, want OK, service_1 with quota", resp)
	}
}
