package deploy

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Bounds of the waits on a real sluice process: generous, because the machine
// running the tests may be loaded.
const (
	buildTimeout = 10 * time.Minute
	startTimeout = 60 * time.Second
)

// repoRoot is the main module's directory, one up from this module.
var repoRoot = func() string {
	wd, err := os.Getwd()
	if err != nil {
		panic(err)
	}
	return filepath.Dir(wd)
}()

var sluiceBin struct {
	once sync.Once
	path string
	err  error
}

// sluiceBinary builds cmd/sluice once per test run and returns its path.
func sluiceBinary(t *testing.T) string {
	t.Helper()
	sluiceBin.once.Do(func() {
		dir, err := os.MkdirTemp("", "sluice-deploy-test")
		if err != nil {
			sluiceBin.err = err
			return
		}
		sluiceBin.path = filepath.Join(dir, "sluice")
		ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "build", "-o", sluiceBin.path, "./cmd/sluice")
		cmd.Dir = repoRoot
		if out, err := cmd.CombinedOutput(); err != nil {
			sluiceBin.err = fmt.Errorf("go build ./cmd/sluice: %v\n%s", err, out)
		}
	})
	if sluiceBin.err != nil {
		t.Fatal(sluiceBin.err)
	}
	return sluiceBin.path
}

func TestMain(m *testing.M) {
	code := m.Run()
	if sluiceBin.path != "" {
		os.RemoveAll(filepath.Dir(sluiceBin.path))
	}
	os.Exit(code)
}

// validateConfig runs `sluice validate` on configuration files, as serve
// would read them together.
func validateConfig(t *testing.T, name string, files []configFile) {
	t.Helper()
	dir := t.TempDir()
	args := []string{"validate"}
	for _, f := range files {
		path := filepath.Join(dir, f.name)
		if err := os.WriteFile(path, []byte(withSecretsIn(t, dir, f.text)), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--config", path)
	}
	out, err := exec.Command(sluiceBinary(t), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: sluice validate: %v\n%s\n--- config:\n%v", name, err, out, files)
	}
}

// probesAnswer runs `sluice serve` on the rendered configuration files and
// asks its health port what the Deployment's probes ask: each must get 200.
// The store is memory://, as the rendered Redis is not here.
func probesAnswer(t *testing.T, o *objects, files []configFile) {
	t.Helper()
	_, c := o.sluiceDeployment(t)
	dir := t.TempDir()
	args := []string{"--store", "memory://"}
	for _, f := range files {
		path := filepath.Join(dir, f.name)
		if err := os.WriteFile(path, []byte(withSecretsIn(t, dir, f.text)), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--config", path)
	}
	_, health := startServeHealth(t, args...)
	for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe} {
		if code, body := httpGet(t, health+p.HTTPGet.Path); code != 200 {
			t.Errorf("the probe of %s on the health port: %d %s", p.HTTPGet.Path, code, body)
		}
	}
}

// passwordFile finds the store's password_file in a configuration.
var passwordFile = regexp.MustCompile(`(?m)^(\s*password_file:\s*)(/\S+)\s*$`)

// withSecretsIn returns text with its password_file, a path the pod has from
// a mounted Secret, moved into dir with a password in it: validate reads the
// file, as serve does, and the chart tests check the mount itself.
func withSecretsIn(t *testing.T, dir, text string) string {
	t.Helper()
	return passwordFile.ReplaceAllStringFunc(text, func(line string) string {
		m := passwordFile.FindStringSubmatch(line)
		secret := filepath.Join(dir, "secret", filepath.Base(m[2]))
		if err := os.MkdirAll(filepath.Dir(secret), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(secret, []byte("test-password\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return m[1] + secret
	})
}

// startServe runs `sluice serve` on 127.0.0.1 with free ports, stopped by
// t.Cleanup, and returns its HTTP base URL.
func startServe(t *testing.T, args ...string) string {
	t.Helper()
	base, _ := startServeHealth(t, args...)
	return base
}

// startServeHealth is startServe with the health port on too: it returns
// the HTTP API's base URL and the health port's.
func startServeHealth(t *testing.T, args ...string) (base, health string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	args = append([]string{"serve", "--http-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0", "--health-addr", "127.0.0.1:0", "--log-format", "json"}, args...)
	cmd := exec.CommandContext(ctx, sluiceBinary(t), args...)
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 15 * time.Second
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })

	// The port is known once the process logs it: listening on :0 leaves no
	// window in which another process could take a port picked in advance.
	addr := make(chan [2]string, 1)
	var logs strings.Builder
	var logsMu sync.Mutex
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logsMu.Lock()
			logs.WriteString(sc.Text() + "\n")
			logsMu.Unlock()
			var line struct {
				Msg    string `json:"msg"`
				HTTP   string `json:"http"`
				Health string `json:"health"`
			}
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "sluice serving" {
				addr <- [2]string{line.HTTP, line.Health}
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	select {
	case a := <-addr:
		return "http://" + a[0], "http://" + a[1]
	case <-time.After(startTimeout):
		logsMu.Lock()
		defer logsMu.Unlock()
		t.Fatalf("sluice serve did not start within %v; its log:\n%s", startTimeout, logs.String())
		return "", ""
	}
}

// httpGet returns a GET's status and body.
func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
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

// check asks the service for one decision and returns the HTTP status.
func check(t *testing.T, base, policy, key string) int {
	t.Helper()
	body := fmt.Sprintf(`{"policy":%q,"key":%q}`, policy, key)
	resp, err := http.Post(base+"/v1/check", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
