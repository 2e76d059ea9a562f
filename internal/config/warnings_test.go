package config

import (
	"path/filepath"
	"strings"
	"testing"
)

// A sliding_log over the cap fails to load with its memory figure, in both
// formats; one between the warning threshold and the cap loads with a warning
// naming where it is defined.
func TestSlidingLogCapAndWarning(t *testing.T) {
	files := map[string]string{
		"huge.yaml":  y("policies:", "  - {name: huge, algorithm: sliding_log, limit: 100000, period: 1h}"),
		"envoy.yaml": y("domain: d", "descriptors:", "  - key: k", "    rate_limit: {algorithm: sliding_log, unit: year, requests_per_unit: 9000000000000000}"),
		"big.yaml":   y("policies:", "  - {name: big, algorithm: sliding_log, limit: 5000, period: 1h}", "  - {name: small, algorithm: sliding_log, limit: 5, period: 1h}", "  - {name: quota, algorithm: fixed_window, limit: 9000000000, period: 24h}"),
	}
	paths := write(t, files, "huge.yaml", "envoy.yaml", "big.yaml")
	for _, path := range paths[:2] {
		_, err := Load(path)
		if err == nil {
			t.Fatalf("%s loaded", path)
		}
		for _, want := range []string{filepath.Base(path) + ":", "sliding_log keeps one entry per admitted unit", "per key in Redis", "use sliding_window or gcra"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %q lacks %q", path, err, want)
			}
		}
	}
	cfg, err := Load(paths[2])
	if err != nil {
		t.Fatal(err)
	}
	w := cfg.Warnings()
	if len(w) != 1 || !strings.HasPrefix(w[0], paths[2]+":2: policy big: sliding_log keeps one entry per admitted unit: limit 5000 can hold up to 130 kB per key in Redis") {
		t.Errorf("Warnings() = %q", w)
	}
}
