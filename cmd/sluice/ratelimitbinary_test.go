package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/testwait"
)

var builtSluice struct {
	once sync.Once
	path string
	err  error
}

// sluiceBinary builds this command once per test run and returns its path,
// so that tests can run `sluice serve` as it is deployed: a process of its
// own, configured by its environment.
func sluiceBinary(t *testing.T) string {
	t.Helper()
	builtSluice.once.Do(func() {
		dir, err := os.MkdirTemp("", "sluice-bin")
		if err != nil {
			builtSluice.err = err
			return
		}
		builtSluice.path = filepath.Join(dir, "sluice")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		if out, err := exec.CommandContext(ctx, "go", "build", "-o", builtSluice.path, ".").CombinedOutput(); err != nil {
			builtSluice.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if builtSluice.err != nil {
		t.Fatal(builtSluice.err)
	}
	return builtSluice.path
}

// freePort returns a loopback port nothing listens on now.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// startWithEnv runs `sluice serve` with env as its whole environment, and
// returns its log once it serves; it is stopped with SIGINT at cleanup.
func startWithEnv(t *testing.T, env []string) *syncBuffer {
	t.Helper()
	_, logs := startSluice(t, env, "serve")
	return logs
}

// startSluice runs the sluice binary with args and env as its whole
// environment, and returns the process and its log once it serves; it is
// stopped with SIGINT at cleanup (a test may kill it before).
func startSluice(t *testing.T, env []string, args ...string) (*exec.Cmd, *syncBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, sluiceBinary(t), args...)
	cmd.Env = env
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 20 * time.Second
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	logs := &syncBuffer{}
	serving := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		once := sync.Once{}
		for sc.Scan() {
			fmt.Fprintln(logs, sc.Text())
			if strings.Contains(sc.Text(), `"msg":"sluice serving"`) {
				once.Do(func() { close(serving) })
			}
		}
	}()
	select {
	case <-serving:
	case <-time.After(60 * time.Second):
		t.Fatalf("sluice %s did not start:\n%s", strings.Join(args, " "), logs.String())
	}
	return cmd, logs
}

// TestRatelimitManifestEnvironment: two `sluice serve` processes given only
// envoyproxy/ratelimit's environment, as its container manifest sets it,
// listen where PORT and GRPC_PORT say and share one count in the Redis
// REDIS_URL names: on a limit of 1 an hour, the first request (on one) is
// OK and the second (on the other) OVER_LIMIT. ratelimit's /healthcheck and
// /json answer, and the one warning names the variables left unhonoured.
func TestRatelimitManifestEnvironment(t *testing.T) {
	redis := redistest.Start(t)
	root := t.TempDir()
	dir := filepath.Join(root, "ratelimit", "config")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "limits.yaml"), "domain: rl\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: 1}\n")
	type node struct{ http, grpc string }
	nodes := []node{{freePort(t), freePort(t)}, {freePort(t), freePort(t)}}
	logs := make([]*syncBuffer, len(nodes))
	for i, n := range nodes {
		logs[i] = startWithEnv(t, []string{
			"RUNTIME_ROOT=" + root, "RUNTIME_SUBDIRECTORY=ratelimit", "RUNTIME_WATCH_ROOT=false", "RUNTIME_IGNOREDOTFILES=true",
			"REDIS_SOCKET_TYPE=tcp", "REDIS_URL=" + redis.Addr(),
			"HOST=127.0.0.1", "PORT=" + n.http, "GRPC_HOST=127.0.0.1", "GRPC_PORT=" + n.grpc,
			"USE_STATSD=false", "LOG_LEVEL=debug", "LOG_FORMAT=json",
			"NEAR_LIMIT_RATIO=0.8", "LOCAL_CACHE_SIZE_IN_BYTES=1048576",
			// Not ratelimit's: two nodes on one host cannot share the
			// health port's default, :8082.
			"SLUICE_HEALTH_ADDR=127.0.0.1:" + freePort(t),
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := &rlsv3.RateLimitRequest{Domain: "rl", Descriptors: []*commonv3.RateLimitDescriptor{
		{Entries: []*commonv3.RateLimitDescriptor_Entry{{Key: "user", Value: "alice"}}}}}
	for i, want := range []rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT} {
		conn, err := grpc.NewClient("127.0.0.1:"+nodes[i].grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		resp, err := rlsv3.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, req)
		if err != nil || resp.OverallCode != want {
			t.Fatalf("node %d: %v %v, want %v\n%s", i, resp, err, want, logs[i].String())
		}
	}
	for i, n := range nodes {
		base := "http://127.0.0.1:" + n.http
		if code, body := get(t, base+"/healthcheck"); code != 200 || body != "OK" {
			t.Fatalf("node %d: /healthcheck %d %q", i, code, body)
		}
		if code, body := postJSON(t, base+"/json", `{"domain":"rl","descriptors":[{"entries":[{"key":"user","value":"alice"}]}]}`); code != 429 ||
			!strings.Contains(body, `"overallCode":"OVER_LIMIT"`) {
			t.Fatalf("node %d: /json %d %q", i, code, body)
		}
	}
	for i, l := range logs {
		text := l.String()
		var warning string
		for _, line := range strings.Split(text, "\n") {
			if strings.Contains(line, "envoyproxy/ratelimit variables ignored") {
				if warning != "" {
					t.Fatalf("node %d: more than one warning:\n%s", i, text)
				}
				warning = line
			}
		}
		for _, name := range []string{"NEAR_LIMIT_RATIO", "LOCAL_CACHE_SIZE_IN_BYTES"} {
			if !strings.Contains(warning, name+": ") {
				t.Errorf("node %d: the warning does not name %s: %q", i, name, warning)
			}
		}
		for _, name := range []string{"USE_STATSD", "RUNTIME", "REDIS", "PORT"} {
			if strings.Contains(warning, name) {
				t.Errorf("node %d: the warning names %s, which is honoured: %q", i, name, warning)
			}
		}
	}
	// LOG_LEVEL=debug: a request for an unknown domain is logged.
	if code, _ := postJSON(t, "http://127.0.0.1:"+nodes[0].http+"/json", `{"domain":"typo","descriptors":[{"entries":[{"key":"user","value":"x"}]}]}`); code != 200 {
		t.Fatalf("unknown domain: %d", code)
	}
	testwait.UntilSaw(t, "LOG_LEVEL=debug: a debug line for the unknown domain", func() (bool, string) {
		out := logs[0].String()
		return strings.Contains(out, `"level":"DEBUG","msg":"unknown rate limit domain: no limits apply","domain":"typo"`), "\n" + out
	})
}
