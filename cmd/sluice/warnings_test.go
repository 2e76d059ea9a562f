package main

import (
	"strings"
	"testing"
)

// serve logs a warning for a costly policy, when it loads the configuration (at start, and
// again on every reload).
func TestServeWarnsOfCostlyPolicies(t *testing.T) {
	s := startServe(t, nativeConfig+"  - name: big_log\n    algorithm: sliding_log\n    limit: 5000\n    period: 1h\n")
	if !strings.Contains(s.logs.String(), `msg="costly policy" warning="`+s.native+`:8: policy big_log: sliding_log keeps one entry per admitted unit: limit 5000`) {
		t.Errorf("no warning in the log:\n%s", s.logs)
	}
}
