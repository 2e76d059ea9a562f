package config

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestShare(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	writePlans(t, path, `policies:
  - name: fair
    algorithm: gcra
    limit: 100
    period: 1s
    share: fair
  - name: fast
    algorithm: token_bucket
    limit: 100
    period: 1s
    share: fair
    share_interval: 250ms
  - name: plain
    algorithm: gcra
    limit: 100
    period: 1s
`)
	cfg, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]time.Duration{"fair": DefaultShareInterval, "fast": 250 * time.Millisecond, "plain": 0} {
		p := cfg.Policy(name)
		if p.FairShare != (want != 0) || p.ShareInterval != want {
			t.Errorf("%s: FairShare %v, ShareInterval %v; want interval %v", name, p.FairShare, p.ShareInterval, want)
		}
	}
}

func TestShareInvalid(t *testing.T) {
	for body, want := range map[string]string{
		"algorithm: concurrency\n    share: fair":                    "a concurrency policy limits requests in flight",
		"algorithm: gcra\n    share: equal":                          `share: must be "fair"`,
		"algorithm: gcra\n    share: [fair]":                         "share: must be a string",
		"algorithm: gcra\n    share_interval: 1s":                    "share_interval: applies only with share: fair",
		"algorithm: gcra\n    share: fair\n    share_interval: 1ms":  "share_interval: must be between 10ms and 1m0s",
		"algorithm: gcra\n    share: fair\n    share_interval: 2m":   "share_interval: must be between",
		"algorithm: gcra\n    share: fair\n    share_interval: soon": "share_interval: must be a Go duration",
	} {
		path := filepath.Join(t.TempDir(), "sluice.yaml")
		writePlans(t, path, "policies:\n  - name: p\n    limit: 10\n    period: 1s\n    "+body+"\n")
		_, err := Load(path)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want one saying %q", body, err, want)
		}
	}
}
