package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/testlog"
	"github.com/sluicehq/sluice/internal/testwait"
)

const nativeConfig = `store:
  timeout: 2s
policies:
  - name: api_per_key
    algorithm: gcra
    limit: 3
    period: 1m
`

const envoyConfig = `domain: edge
descriptors:
  - key: remote_address
    rate_limit:
      unit: minute
      requests_per_unit: 2
  - key: path
    value: /health
    rate_limit:
      unlimited: true
`

// syncBuffer is a log the goroutines under test and the test share.
type syncBuffer = testlog.Buffer

// startTestServer runs serve on loopback ports with the two test configs and
// returns it with the native config's path; it is shut down at cleanup.
func startTestServer(t *testing.T, storeURL string) (*server, string, *syncBuffer) {
	t.Helper()
	dir := t.TempDir()
	native, envoy := filepath.Join(dir, "sluice.yaml"), filepath.Join(dir, "envoy.yaml")
	writeFile(t, native, nativeConfig)
	writeFile(t, envoy, envoyConfig)
	logs := &syncBuffer{}
	log, _ := newLogger(logs, "text", "info")
	ctx, cancel := context.WithCancel(context.Background())
	o := serveOptions{configs: cli.StringList{native, envoy}, storeURL: storeURL,
		httpAddr: "127.0.0.1:0", grpcAddr: "127.0.0.1:0", shutdown: 5 * time.Second}
	srv, err := startServer(ctx, o, log)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		srv.wait()
		if !strings.Contains(logs.String(), "stopped") {
			t.Errorf("no clean shutdown in the log:\n%s", logs)
		}
	})
	return srv, native, logs
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestServeMemory(t *testing.T) { testServe(t, "") }

func TestServeRedis(t *testing.T) {
	r := redistest.Start(t)
	testServe(t, r.URL())
}

func testServe(t *testing.T, storeURL string) {
	srv, native, _ := startTestServer(t, storeURL)
	base := "http://" + srv.httpAddr.String()

	// HTTP: three allowed, the fourth denied.
	for i := range 4 {
		status, body := postJSON(t, base+"/v1/check", `{"policy":"api_per_key","key":"alice"}`)
		if want := map[bool]int{true: 200, false: 429}[i < 3]; status != want {
			t.Fatalf("HTTP request %d: %d %s", i, status, body)
		}
	}

	// gRPC: Envoy's API, with a real client from go-control-plane's types.
	conn, err := grpc.NewClient(srv.grpcAddr.String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rls := rlsv3.NewRateLimitServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*commonv3.RateLimitDescriptor{
		{Entries: []*commonv3.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "10.0.0.1"}}},
		{Entries: []*commonv3.RateLimitDescriptor_Entry{{Key: "path", Value: "/health"}}},
	}}
	for i := range 3 {
		resp, err := rls.ShouldRateLimit(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		want := rlsv3.RateLimitResponse_OK
		if i == 2 {
			want = rlsv3.RateLimitResponse_OVER_LIMIT
		}
		if resp.OverallCode != want || len(resp.Statuses) != 2 {
			t.Fatalf("RLS request %d: %v", i, resp)
		}
		if st := resp.Statuses[0]; st.CurrentLimit.GetRequestsPerUnit() != 2 || st.CurrentLimit.GetUnit() != rlsv3.RateLimitResponse_RateLimit_MINUTE || st.LimitRemaining != uint32(max(0, 1-i)) {
			t.Fatalf("RLS request %d: status %v", i, st)
		}
		if st := resp.Statuses[1]; st.Code != rlsv3.RateLimitResponse_OK || st.CurrentLimit != nil {
			t.Fatalf("RLS request %d: the unlimited descriptor got %v", i, st)
		}
	}
	health, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || health.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health: %v %v", health, err)
	}

	// A valid edit takes effect and the state survives it. GCRA keeps its
	// state as time (the theoretical arrival time), so 3 of 3 per minute used
	// is 60 s of debt, which under 5 per minute is still all 5 units. The
	// peek is denied (429) while nothing is left.
	writeFile(t, native, strings.Replace(nativeConfig, "limit: 3", "limit: 5", 1))
	var body string
	testwait.UntilSaw(t, "the edit in force", func() (bool, string) {
		var status int
		status, body = postJSON(t, base+"/v1/check", `{"policy":"api_per_key","key":"alice","cost":0}`)
		return (status == 200 || status == 429) && strings.Contains(body, `"limit":5`), body
	})
	if !strings.Contains(body, `"remaining":0`) {
		t.Fatalf("the reload lost the counters: %s", body)
	}

	// The readiness probe reaches the store.
	if status, body := get(t, base+"/readyz"); status != 200 {
		t.Fatalf("/readyz: %d %s", status, body)
	}
}

func postJSON(t *testing.T, url, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// runCmd runs the sluice command in-process.
func runCmd(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestCheckCommand(t *testing.T) {
	srv, _, _ := startTestServer(t, "")
	server := "http://" + srv.httpAddr.String()
	for i, want := range []int{0, 0, 0, 1} {
		code, out, errOut := runCmd("check", "--server", server, "--policy", "api_per_key", "--key", "bob")
		if code != want {
			t.Fatalf("check %d: exit %d, want %d\n%s%s", i, code, want, out, errOut)
		}
		prefix := map[int]string{0: "allowed: ", 1: "denied: "}[want]
		if !strings.HasPrefix(out, prefix) {
			t.Fatalf("check %d printed %q", i, out)
		}
	}
	code, _, errOut := runCmd("check", "--server", server, "--policy", "nope", "--key", "bob")
	if code != 2 || !strings.Contains(errOut, "nope") {
		t.Fatalf("unknown policy: exit %d %q", code, errOut)
	}
	if code, _, _ := runCmd("check", "--server", "http://127.0.0.1:1", "--policy", "p", "--key", "k", "--timeout", "2s"); code != 2 {
		t.Fatalf("unreachable server: exit %d", code)
	}
	if code, _, _ := runCmd("check", "--policy", "p"); code != 2 {
		t.Fatalf("missing --key: exit %d", code)
	}
}

func TestValidateCommand(t *testing.T) {
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good.yaml"), filepath.Join(dir, "bad.yaml")
	writeFile(t, good, nativeConfig)
	writeFile(t, bad, "policies:\n  - name: x\n    algorithm: gcra\n    limit: 0\n    period: 1m\n    colour: red\n")
	if code, out, errOut := runCmd("validate", "--config", good); code != 0 || !strings.HasPrefix(out, "ok: 1 policy,") {
		t.Fatalf("valid file: exit %d %q %q", code, out, errOut)
	}
	code, _, errOut := runCmd("validate", "--config", bad)
	if code != 1 {
		t.Fatalf("invalid file: exit %d", code)
	}
	for _, want := range []string{bad + ":4:", "limit", bad + ":6:", "colour"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("validate output lacks %q:\n%s", want, errOut)
		}
	}
	costly := filepath.Join(dir, "costly.yaml")
	writeFile(t, costly, "policies:\n  - name: log\n    algorithm: sliding_log\n    limit: 5000\n    period: 1h\n")
	if code, out, errOut := runCmd("validate", "--config", costly); code != 0 || !strings.HasPrefix(out, "ok: 1 policy,") ||
		!strings.Contains(errOut, "warning: "+costly+":2: policy log: sliding_log keeps one entry per admitted unit: limit 5000 can hold up to 130 kB per key in Redis") {
		t.Errorf("costly policy: exit %d %q %q", code, out, errOut)
	}
	// The local fail policy on Redis without store.nodes: valid, warned.
	local := filepath.Join(dir, "local.yaml")
	writeFile(t, local, "store:\n  url: redis://127.0.0.1:1\npolicies:\n  - {name: p, algorithm: gcra, limit: 5, period: 1m}\n")
	if code, _, errOut := runCmd("validate", "--config", local); code != 0 || !strings.Contains(errOut, "warning: store.nodes is not set") {
		t.Errorf("local fail policy without nodes: exit %d %q", code, errOut)
	}
	if code, _, errOut := runCmd("validate", "--store", "redis://127.0.0.1:1", "--config", good); code != 0 || !strings.Contains(errOut, "warning: store.nodes is not set") {
		t.Errorf("--store redis:// without nodes: exit %d %q", code, errOut)
	}
	for _, example := range []string{"sluice.yaml", "envoy-ratelimit.yaml", "envoy-extended.yaml"} {
		path := filepath.Join("..", "..", "examples", example)
		if code, out, errOut := runCmd("validate", "--config", path); code != 0 {
			t.Errorf("%s: exit %d %s%s", example, code, out, errOut)
		}
	}
}

func TestHelpAndVersion(t *testing.T) {
	code, out, _ := runCmd("help")
	if code != 0 || !strings.Contains(out, "sluice serve --config examples/sluice.yaml") {
		t.Fatalf("help: %d %q", code, out)
	}
	for _, c := range commands() {
		code, _, errOut := runCmd(c.name, "--help")
		if code != 0 || !strings.Contains(errOut, "Usage: sluice "+c.name) {
			t.Errorf("%s --help: exit %d %q", c.name, code, errOut)
		}
	}
	if code, out, _ := runCmd("version"); code != 0 || !strings.HasPrefix(out, "sluice ") {
		t.Fatalf("version: %d %q", code, out)
	}
	if code, _, errOut := runCmd("frobnicate"); code != 2 || !strings.Contains(errOut, "unknown command") {
		t.Fatalf("unknown command: %d %q", code, errOut)
	}
	if code, _, errOut := runCmd("serve"); code != 2 || !strings.Contains(errOut, "--config") {
		t.Fatalf("serve without config: %d %q", code, errOut)
	}
}

// TestServeRejectsBadStartup: an invalid config or an unusable address is a
// clear error, not a half-started server.
func TestServeRejectsBadStartup(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	writeFile(t, bad, "policies: 3\n")
	code, _, errOut := runCmd("serve", "--config", bad, "--http-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0")
	if code != 1 || !strings.Contains(errOut, bad+":1") {
		t.Fatalf("invalid config: exit %d %q", code, errOut)
	}
	good := filepath.Join(dir, "good.yaml")
	writeFile(t, good, nativeConfig)
	code, _, errOut = runCmd("serve", "--config", good, "--store", "bogus://x", "--http-addr", "127.0.0.1:0")
	if code != 1 || !strings.Contains(errOut, "unknown scheme") {
		t.Fatalf("bad store: exit %d %q", code, errOut)
	}
}
