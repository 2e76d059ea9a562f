package redisstore

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// TestUnknownAlgorithmIsNeverDecided: a policy that skipped Validate and
// names no algorithm Sluice has is not run as GCRA: building its key, which
// every call does before it sends or queues anything, panics naming it.
func TestUnknownAlgorithmIsNeverDecided(t *testing.T) {
	bad := sluice.Policy{Name: "p", Algorithm: "gcra2", Limit: 10, Period: time.Second}
	// No Runner: the call must stop before it would reach one.
	s := NewWithRunner(nil)
	ctx := context.Background()
	req := sluice.Request{Policy: &bad, Key: "k", Cost: 1}
	for what, f := range map[string]func(){
		"Decide":    func() { _, _ = s.Decide(ctx, req) },
		"DecideAll": func() { _ = s.DecideAll(ctx, []sluice.Request{req}, make([]sluice.Result, 1)) },
		"Reset":     func() { _ = s.Reset(ctx, &bad, "k") },
		"Key":       func() { s.Key(&bad, "k") },
		"scriptFor": func() { scriptFor(bad.Algorithm) },
	} {
		func() {
			defer func() {
				msg, _ := recover().(string)
				if !strings.Contains(msg, `unknown algorithm "gcra2"`) || !strings.Contains(msg, "Validate") {
					t.Errorf("%s: recovered %q, want a panic naming the unknown algorithm and Validate", what, msg)
				}
			}()
			f()
		}()
	}
}
