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

// adminTokenFor returns a fresh admin token strong enough for serve.
func adminTokenFor(t *testing.T) string {
	t.Helper()
	return secret(t, "tok-") + secret(t, "")
}

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

// TestServeAdminToken: serve turns the admin API on only with a token, from
// --admin-token-file (trailing newline trimmed) or SLUICE_ADMIN_TOKEN.
// Without one POST /v1/admin/reset does not exist (404), whatever the
// request carries; with one, a missing or wrong token is 401. An empty token
// file, or a weak token from either source, is a start-up error rather than
// an admin API open to guessing.
func TestServeAdminToken(t *testing.T) {
	reset := func(t *testing.T, s *served, auth string) int {
		t.Helper()
		var h []string
		if auth != "" {
			h = []string{"Authorization", auth}
		}
		resp, _ := do(t, "POST", s.base+"/v1/admin/reset", `{"policy":"api","key":"k"}`, h...)
		return resp.StatusCode
	}
	const memory = "store: {url: 'memory://'}\npolicies:\n  - {name: api, algorithm: gcra, limit: 10, period: 1h}\n"
	fileToken, envToken := adminTokenFor(t), adminTokenFor(t)

	t.Run("no token", func(t *testing.T) {
		t.Setenv("SLUICE_ADMIN_TOKEN", "")
		s := startServe(t, memory)
		for _, auth := range []string{"", "Bearer ", "Bearer anything"} {
			if code := reset(t, s, auth); code != 404 {
				t.Errorf("Authorization %q without a token configured: %d, want 404", auth, code)
			}
		}
	})
	t.Run("token file", func(t *testing.T) {
		t.Setenv("SLUICE_ADMIN_TOKEN", envToken)
		dir := t.TempDir()
		file := filepath.Join(dir, "token")
		writeFile(t, file, fileToken+"\n")
		s := startServeIn(t, dir, memory, func(ss *serveSetup) { ss.opts.adminTokenFile = file })
		for _, auth := range []string{"", "Bearer wrong", "Bearer " + envToken, fileToken, "Bearer  " + fileToken} {
			if code := reset(t, s, auth); code != 401 {
				t.Errorf("Authorization %q: %d, want 401", auth, code)
			}
		}
		if code := reset(t, s, "Bearer "+fileToken); code != 200 {
			t.Errorf("the file's token: %d, want 200", code)
		}
	})
	t.Run("environment", func(t *testing.T) {
		t.Setenv("SLUICE_ADMIN_TOKEN", envToken)
		s := startServe(t, memory)
		if code := reset(t, s, "Bearer wrong"); code != 401 {
			t.Errorf("wrong token: %d, want 401", code)
		}
		if code := reset(t, s, "Bearer "+envToken); code != 200 {
			t.Errorf("the environment's token: %d, want 200", code)
		}
	})
	start := func(t *testing.T, args ...string) (int, string) {
		t.Helper()
		code, _, errOut := runCmd(append([]string{"serve", "--config", filepath.Join("..", "..", "examples", "sluice.yaml"),
			"--http-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0", "--health-addr", ""}, args...)...)
		return code, errOut
	}
	t.Run("empty token file", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "token")
		writeFile(t, file, "\n")
		if code, errOut := start(t, "--admin-token-file", file); code != 1 || !strings.Contains(errOut, "empty") {
			t.Fatalf("empty token file: exit %d %q", code, errOut)
		}
	})
	for _, weak := range []string{"x", "file-token", fileToken[:31], strings.Repeat("ab", 20)} {
		t.Run("weak token "+weak, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "token")
			writeFile(t, file, weak+"\n")
			code, errOut := start(t, "--admin-token-file", file)
			if code != 1 || !strings.Contains(errOut, "--admin-token-file") || !strings.Contains(errOut, "openssl rand -hex 32") {
				t.Errorf("weak token file: exit %d %q", code, errOut)
			}
			t.Setenv("SLUICE_ADMIN_TOKEN", weak)
			code, errOut = start(t)
			if code != 1 || !strings.Contains(errOut, "SLUICE_ADMIN_TOKEN") || !strings.Contains(errOut, "openssl rand -hex 32") {
				t.Errorf("weak SLUICE_ADMIN_TOKEN: exit %d %q", code, errOut)
			}
			if len(weak) > 5 && strings.Contains(errOut, weak) {
				t.Errorf("the error quotes the token: %q", errOut)
			}
		})
	}
}
