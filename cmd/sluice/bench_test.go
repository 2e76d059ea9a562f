package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/cli"
)

// The bench limits are buckets with a long period rather than fixed windows:
// a window aligned to the epoch could roll over during the test and admit
// twice the limit; a bucket of 500 refilling one unit every 2h admits exactly
// 500 in a short test.
const benchNativeConfig = `policies:
  - name: bench_http
    algorithm: token_bucket
    limit: 500
    period: 1000h
  - name: bench_slots
    algorithm: concurrency
    limit: 4
    period: 1h
`

const benchEnvoyConfig = `domain: bench
descriptors:
  - key: tenant
    value: acme
    descriptors:
      - key: user
        rate_limit:
          algorithm: gcra
          period: 1000h
          requests_per_unit: 500
`

// startBenchServer runs serve in-process on loopback ports; it stops at
// cleanup.
func startBenchServer(t *testing.T) *server {
	t.Helper()
	dir := t.TempDir()
	native, envoy := filepath.Join(dir, "sluice.yaml"), filepath.Join(dir, "envoy.yaml")
	writeFile(t, native, benchNativeConfig)
	writeFile(t, envoy, benchEnvoyConfig)
	log, _ := newLogger(&syncBuffer{}, "text", "warn")
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := startServer(ctx, serveOptions{configs: cli.StringList{native, envoy}, httpAddr: "127.0.0.1:0",
		grpcAddr: "127.0.0.1:0", shutdown: 2 * time.Second}, log)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); srv.wait() })
	return srv
}

// benchJSONRun runs `bench --json` with args and decodes its output.
func benchJSONRun(t *testing.T, args ...string) benchJSON {
	t.Helper()
	var stdout, stderr bytes.Buffer
	// Bounded by request count; the time limits only stop a hung run, and
	// are generous so that a loaded machine finishes the requests.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if code := runBench(ctx, append([]string{"--json", "--duration", "90s"}, args...), &stdout, &stderr); code != 0 {
		t.Fatalf("bench %v: exit %d\nstdout: %s\nstderr: %s", args, code, stdout.String(), stderr.String())
	}
	var raw map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &raw); err != nil {
		t.Fatalf("bench --json printed %q: %v", stdout.String(), err)
	}
	for _, k := range []string{"throughput_rps", "p50_ms", "p90_ms", "p99_ms", "p999_ms", "allowed", "denied", "errors"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("bench --json: no %q in %s", k, stdout.String())
		}
	}
	var out benchJSON
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	if stderr.Len() > 0 {
		t.Errorf("bench --json wrote to stderr: %s", stderr.String())
	}
	if out.Allowed+out.Denied+out.Errors != out.Requests {
		t.Errorf("allowed %d + denied %d + errors %d != requests %d", out.Allowed, out.Denied, out.Errors, out.Requests)
	}
	if !(out.P50MS > 0 && out.P50MS <= out.P90MS && out.P90MS <= out.P99MS && out.P99MS <= out.P999MS) {
		t.Errorf("percentiles out of order: %+v", out)
	}
	return out
}

func TestBenchGRPC(t *testing.T) {
	srv := startBenchServer(t)
	// One key: the descriptor (tenant, acme), (user, k0) has 500 per 1000h.
	out := benchJSONRun(t, "--target", "grpc://"+srv.grpcAddr.String(), "--domain", "bench",
		"--descriptor", "tenant=acme,user", "--keys", "1", "--concurrency", "8", "--requests", "2000")
	if out.Requests != 2000 || out.Allowed != 500 || out.Denied != 1500 || out.Errors != 0 {
		t.Fatalf("got %+v; want 2000 requests: 500 allowed, 1500 denied", out)
	}
}

func TestBenchHTTP(t *testing.T) {
	srv := startBenchServer(t)
	out := benchJSONRun(t, "--target", "http://"+srv.httpAddr.String(), "--policy", "bench_http",
		"--keys", "1", "--concurrency", "8", "--requests", "2000")
	if out.Requests != 2000 || out.Allowed != 500 || out.Denied != 1500 || out.Errors != 0 {
		t.Fatalf("got %+v; want 2000 requests: 500 allowed, 1500 denied", out)
	}
}

// On a concurrency policy each call's slot is released at once: four
// workers never hold more than the four slots, so every call is admitted
// (without the release, all but four would be denied for the hour).
func TestBenchConcurrencyReleases(t *testing.T) {
	srv := startBenchServer(t)
	for _, args := range [][]string{
		{"--target", "http://" + srv.httpAddr.String(), "--policy", "bench_slots"},
		{"--target", "memory://", "--algorithm", "concurrency", "--limit", "4", "--period", "1h"},
	} {
		out := benchJSONRun(t, append(args, "--keys", "1", "--concurrency", "4", "--requests", "400")...)
		if out.Requests != 400 || out.Allowed != 400 || out.Errors != 0 {
			t.Fatalf("%v: got %+v; want 400 requests, all allowed", args, out)
		}
	}
}

func TestBenchHTTPUnknownPolicyFails(t *testing.T) {
	srv := startBenchServer(t)
	var stdout, stderr bytes.Buffer
	code := runBench(t.Context(), []string{"--json", "--target", "http://" + srv.httpAddr.String(), "--policy", "nope",
		"--concurrency", "2", "--requests", "10"}, &stdout, &stderr)
	if code != 1 || !strings.Contains(stdout.String(), `"errors":10`) || !strings.Contains(stdout.String(), "no policy named") {
		t.Fatalf("exit %d, stdout %s; want exit 1 and 10 errors naming the policy", code, stdout.String())
	}
}

func TestBenchMemoryHumanOutput(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := runBench(t.Context(), []string{"--target", "memory://", "--duration", "1100ms", "--concurrency", "8",
		"--algorithm", "token_bucket", "--limit", "100", "--period", "1000h", "--keys", "3", "--hot", "0.2"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	for _, want := range []string{"throughput", "p99.9", "allowed      400", "errors       0"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, stdout.String())
		}
	}
	if !strings.Contains(stderr.String(), "decisions/s") {
		t.Errorf("no progress line on stderr: %q", stderr.String())
	}
	t.Logf("\n%s", stdout.String())
}

// TestBenchDeadTarget: against a target nothing listens on, bench reports
// no throughput and every call as an error, says so on stderr and exits 1,
// in both output formats.
func TestBenchDeadTarget(t *testing.T) {
	args := []string{"--target", "http://127.0.0.1:1", "--policy", "p", "--requests", "200", "--concurrency", "4", "--quiet"}
	var stdout, stderr bytes.Buffer
	if code := runBench(t.Context(), args, &stdout, &stderr); code != 1 {
		t.Fatalf("exit %d, want 1\n%s%s", code, stdout.String(), stderr.String())
	}
	for _, want := range []string{"throughput   none: no call got a decision", "errors       200 (100.0%)", "connection refused"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, stdout.String())
		}
	}
	if strings.Contains(stdout.String(), "req/s") || !strings.Contains(stderr.String(), "no call got a decision: all 200 failed") {
		t.Errorf("stdout %q, stderr %q", stdout.String(), stderr.String())
	}
	stdout.Reset()
	stderr.Reset()
	if code := runBench(t.Context(), append(args, "--json"), &stdout, &stderr); code != 1 {
		t.Fatalf("--json: exit %d, want 1", code)
	}
	var out benchJSON
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("--json printed %q: %v", stdout.String(), err)
	}
	if out.ThroughputRPS != 0 || out.Errors != 200 || out.ErrorRPS <= 0 || out.P50MS != 0 {
		t.Errorf("--json: %+v; want no throughput, 200 errors at a positive rate", out)
	}
}

func TestBenchUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"--target", "memory://", "--hot", "2"},
		{"--target", "memory://", "--keys-dist", "pareto"},
		{"--target", "memory://", "--keys-dist", "zipf", "--zipf-s", "0.9"},
		{"--target", "ftp://x"},
		{"--target", "http://127.0.0.1:1"}, // no --policy
		{"--target", "grpc://127.0.0.1:1", "--descriptor", "a,b"},
		{"--target", "memory://", "--algorithm", "nope"},
	} {
		var stdout, stderr bytes.Buffer
		if code := runBench(t.Context(), args, &stdout, &stderr); code != 2 {
			t.Errorf("bench %v: exit %d; want 2 (stderr %s)", args, code, stderr.String())
		}
	}
}
