package main

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// startWithAdmin runs serve with a fresh admin token, its admin API on
// adminAddr ("": on the HTTP port), and a health port.
func startWithAdmin(t *testing.T, adminAddr string) (*served, string) {
	t.Helper()
	token := adminTokenFor(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "token")
	writeFile(t, file, token+"\n")
	s := startServeIn(t, dir, nativeConfig, func(ss *serveSetup) {
		ss.opts.adminTokenFile, ss.opts.adminAddr, ss.opts.healthAddr = file, adminAddr, "127.0.0.1:0"
	})
	return s, token
}

// send makes one request and returns its status and body.
func send(t *testing.T, c *http.Client, method, url, body string, header ...string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestServeAdminAddr: with --admin-addr the admin API is on its own port
// and nowhere else, and that port serves nothing else; the health port
// answers /healthz, /readyz and /metrics alone. --admin-addr without a token
// is a start-up error.
func TestServeAdminAddr(t *testing.T) {
	s, token := startWithAdmin(t, "127.0.0.1:0")
	admin, health := "http://"+s.srv.adminAddr.String(), "http://"+s.srv.healthAddr.String()
	reset := `{"policy":"api_per_key","key":"k"}`
	auth := []string{"Authorization", "Bearer " + token}
	for _, c := range []struct {
		method, url, body string
		header            []string
		want              int
	}{
		{"POST", s.base + "/v1/admin/reset", reset, auth, 404},
		{"GET", s.base + "/v1/admin/overrides", "", auth, 404},
		{"POST", admin + "/v1/admin/reset", reset, auth, 200},
		{"GET", admin + "/v1/admin/overrides", "", auth, 200},
		{"POST", admin + "/v1/admin/reset", reset, []string{"Authorization", "Bearer wrong"}, 401},
		{"POST", admin + "/v1/check", checkBody, nil, 404},
		{"GET", admin + "/healthz", "", nil, 404},
		{"GET", health + "/healthz", "", nil, 200},
		{"GET", health + "/readyz", "", nil, 200},
		{"GET", health + "/metrics", "", nil, 200},
		{"POST", health + "/v1/check", checkBody, nil, 404},
		{"POST", health + "/v1/admin/reset", reset, auth, 404},
		{"POST", s.base + "/v1/check", strings.ReplaceAll(checkBody, "#", "1"), []string{"Content-Type", "application/json"}, 200},
	} {
		if got, body := send(t, httpc, c.method, c.url, c.body, c.header...); got != c.want {
			t.Errorf("%s %s: %d %s, want %d", c.method, c.url, got, body, c.want)
		}
	}
	if v, _ := s.metricOn(t, health, "sluice_admin_auth_failures_total"); v != 1 {
		t.Errorf("sluice_admin_auth_failures_total %v, want 1", v)
	}

	code, _, errOut := runCmd("serve", "--config", filepath.Join("..", "..", "examples", "sluice.yaml"),
		"--http-addr", "127.0.0.1:0", "--grpc-addr", "", "--health-addr", "", "--admin-addr", "127.0.0.1:0")
	if code != 1 || !strings.Contains(errOut, "--admin-addr needs an admin token") {
		t.Errorf("--admin-addr without a token: exit %d %q", code, errOut)
	}
}

// TestServeAdminTokenFlood: one address sends wrong tokens as fast as it
// can. Its first AdminFailureBurst are checked (401); the rest get 429 with
// Retry-After, unchecked; the admin, from another address, is served
// throughout; the log holds at most 10 lines about it all.
func TestServeAdminTokenFlood(t *testing.T) {
	s, token := startWithAdmin(t, "")
	attacker, admin := clientFrom(flooder, false), clientFrom(bystand, false)
	const attempts = 1000
	counts := map[int]int{}
	start := time.Now()
	for i := range attempts {
		code, _ := send(t, attacker, "POST", s.base+"/v1/admin/reset", "{}", "Authorization", fmt.Sprintf("Bearer guess-%032d", i))
		counts[code]++
		if i%100 == 0 {
			if code, body := send(t, admin, "POST", s.base+"/v1/admin/reset", `{"policy":"api_per_key","key":"k"}`,
				"Authorization", "Bearer "+token); code != 200 {
				t.Fatalf("the admin from another address, after %d guesses: %d %s", i, code, body)
			}
		}
	}
	elapsed := time.Since(start)
	refusals := strings.Count(s.logs.String(), "admin API request refused")
	t.Logf("%d wrong tokens from one address in %v (%.0f/s): %v by status; %d log lines",
		attempts, elapsed.Round(time.Millisecond), attempts/elapsed.Seconds(), counts, refusals)
	// The failures drain at one per 6 s: a slow run may see a few more checked.
	slack := int(elapsed / (time.Minute / 10))
	if counts[401] < 10 || counts[401] > 10+slack || counts[429] != attempts-counts[401] {
		t.Errorf("statuses %v, want 10 (+%d) 401 and the rest 429", counts, slack)
	}
	if refusals > 10+slack {
		t.Errorf("%d log lines about refused admin requests, want at most %d", refusals, 10+slack)
	}
	failures, _ := s.metric(t, "sluice_admin_auth_failures_total")
	throttled, _ := s.metric(t, "sluice_admin_auth_throttled_total")
	if int(failures) != counts[401] || int(throttled) != counts[429] {
		t.Errorf("metrics: %v failures, %v throttled; want %d and %d", failures, throttled, counts[401], counts[429])
	}
}
