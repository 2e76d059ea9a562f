package main

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestReleaseCLI: sluice check prints the release token of the slot it
// acquired; sluice release gives it back once (exit 0), then says nothing
// was held (exit 1); a bad token is an error (exit 2).
func TestReleaseCLI(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	writeFile(t, path, "policies:\n  - {name: inflight, algorithm: concurrency, limit: 1, period: 1h}\n")
	server := startCheckServer(t, path)
	check := []string{"check", "--server", server, "--policy", "inflight", "--key", "job"}
	code, out, errOut := runCmd(check...)
	token := regexp.MustCompile(`--token ([0-9a-f]{32})`).FindStringSubmatch(out)
	if code != 0 || token == nil {
		t.Fatalf("check: exit %d %q %q; want 0 and a release token", code, out, errOut)
	}
	if code, out, _ := runCmd(check...); code != 1 || !strings.Contains(out, "denied") {
		t.Fatalf("second check: exit %d %q, want denied", code, out)
	}
	release := []string{"release", "--server", server, "--policy", "inflight", "--key", "job", "--token"}
	for _, c := range []struct {
		token string
		code  int
		out   string
	}{
		{"NOT-A-TOKEN", 2, "release_token: a release token holds only"},
		{token[1], 0, "released: policy inflight"},
		{token[1], 1, "not released: policy inflight"},
	} {
		code, out, errOut := runCmd(append(release, c.token)...)
		if code != c.code || !strings.Contains(out+errOut, c.out) {
			t.Errorf("release %s: exit %d %q %q; want %d and %q", c.token, code, out, errOut, c.code, c.out)
		}
	}
	if code, out, errOut := runCmd(check...); code != 0 {
		t.Fatalf("check after the release: exit %d %q %q", code, out, errOut)
	}
}
