package main

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/testwait"
)

// proxyOn is a proxy configuration on redisURL limiting every request to
// limit an hour per X-User.
func proxyOn(redisURL string, limit int) string {
	return fmt.Sprintf("store:\n  url: %q\n  timeout: 30s\npolicies:\n  - {name: api, algorithm: fixed_window, limit: %d, period: 1h}\n"+
		"proxy:\n  routes:\n    - limits: [{policy: api, key: \"header:X-User\"}]\n", redisURL, limit)
}

// proxiedAs sends one request through p as user and returns its status and
// RateLimit-Policy.
func proxiedAs(t *testing.T, p *proxied, user string) (int, string) {
	t.Helper()
	resp, _ := do(t, "GET", p.base+"/x", "", "X-User", user)
	return resp.StatusCode, resp.Header.Get("RateLimit-Policy")
}

// TestProxyReloadsAndTakesOverrides: `sluice proxy` decides as serve does.
// An override set on a serve node sharing its Redis is enforced by the
// proxy; an edit of its configuration file is put in force without a
// restart, and one without a proxy: section is refused, the routes in
// force kept; its decisions count in sluice_decisions_total per policy.
func TestProxyReloadsAndTakesOverrides(t *testing.T) {
	redis := redistest.Start(t)
	serve := startNode(t, proxyOn(redis.URL(), 2))
	p := startProxyWith(t, proxyOn(redis.URL(), 2), nil)
	probe := 0
	limitIs := func(want string) func() (bool, string) {
		return func() (bool, string) {
			probe++
			code, policy := proxiedAs(t, p, fmt.Sprint("probe", probe)) // a fresh key each time
			return code == http.StatusOK && policy == want, fmt.Sprint(code, " ", policy)
		}
	}

	if code, out, errOut := serve.overrideCLI(t, "set", "api", "--prefix", "vip", "--limit", "5"); code != 0 {
		t.Fatalf("override set: %d %s %s", code, out, errOut)
	}
	testwait.UntilSaw(t, "the proxy enforcing serve's override", func() (bool, string) {
		probe++
		code, policy := proxiedAs(t, p, fmt.Sprint("vip-probe", probe))
		return code == http.StatusOK && policy == `"api";q=5;w=3600`, fmt.Sprint(code, " ", policy)
	})
	var got []int
	for range 6 {
		code, _ := proxiedAs(t, p, "vip-final")
		got = append(got, code)
	}
	if fmt.Sprint(got) != "[200 200 200 200 200 429]" {
		t.Errorf("a key under the override of 5: %v", got)
	}

	writeFile(t, p.config, proxyOn(redis.URL(), 3))
	testwait.UntilSaw(t, "the edited limit in force", limitIs(`"api";q=3;w=3600`))
	writeFile(t, p.config, "policies:\n  - {name: api, algorithm: fixed_window, limit: 7, period: 1h}\n")
	testwait.UntilSaw(t, "the reload without a proxy: section refused", func() (bool, string) {
		return strings.Contains(p.logs.String(), "no proxy: section"), p.logs.String()
	})
	if ok, saw := limitIs(`"api";q=3;w=3600`)(); !ok {
		t.Errorf("after a refused reload: %s, want the limit in force, 3", saw)
	}

	for name, atLeast := range map[string]float64{
		`sluice_decisions_total{decision="allowed",policy="api"}`: 5,
		`sluice_decisions_total{decision="denied",policy="api"}`:  1,
		`sluice_config_reloads_total{result="success"}`:           1,
		`sluice_config_reloads_total{result="failure"}`:           1,
	} {
		if v := metric(t, p.health, regexp.QuoteMeta(name)); v < atLeast {
			t.Errorf("%s = %v, want at least %v", name, v, atLeast)
		}
	}
}
