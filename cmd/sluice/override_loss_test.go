package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/testwait"
)

// TestOverridesAfterRedisLosesData: two nodes enforce an override of 1000
// on a policy of 2 an hour; then Redis loses everything. Though nothing is
// published, each node goes back to the policy's 2 at its next version check
// (measured and logged), an override set afterwards is enforced by both,
// removing the lost one is a 404, and a node started afterwards agrees.
func TestOverridesAfterRedisLosesData(t *testing.T) {
	for _, lose := range []string{"flushall", "restart"} {
		t.Run(lose, func(t *testing.T) {
			redis := redistest.Start(t)
			// A generous per-call timeout: a slow call on a loaded machine must
			// not be decided by the fail policy.
			native := fmt.Sprintf("store:\n  url: %q\n  timeout: 30s\npolicies:\n  - name: api\n    algorithm: gcra\n    limit: 2\n    period: 1h\n", redis.URL())
			nodes := []*node{startNode(t, native), startNode(t, native)}
			// Many changes: the version is well past where a new count starts.
			for i := range 12 {
				if code, out, errOut := nodes[i%2].overrideCLI(t, "set", "api", "--prefix", "acme:", "--limit", fmt.Sprint(989+i)); code != 0 {
					t.Fatalf("override set: %d %s %s", code, out, errOut)
				}
			}
			for i, n := range nodes {
				testwait.UntilSaw(t, fmt.Sprintf("node %d enforcing the override", i), func() (bool, string) {
					l := n.limitOf(t, "acme:probe")
					return l == 1000, fmt.Sprint("limit ", l)
				})
			}

			if lose == "flushall" {
				if _, err := redis.Do("FLUSHALL"); err != nil {
					t.Fatal(err)
				}
			} else {
				redis.Restart()
			}
			lost := time.Now()
			for i, n := range nodes {
				testwait.Within(t, 5*time.Second, fmt.Sprintf("node %d back on the policy's limit", i), func() (bool, string) {
					l := n.limitOf(t, "acme:probe")
					return l == 2, fmt.Sprint("limit ", l)
				})
			}
			t.Logf("both nodes enforce what Redis holds %v after it lost the overrides", time.Since(lost).Round(time.Millisecond))
			for i, n := range nodes {
				// A decision that meets a connection the restart closed is
				// decided by the fail policy, and counted apart: not what
				// this test counts.
				onRedis := 0
				testwait.UntilSaw(t, fmt.Sprintf("node %d deciding on Redis", i), func() (bool, string) {
					if _, r, body := n.check(t, "warm"); len(r.Checks) == 1 && !r.Checks[0].Degraded {
						onRedis++
					} else {
						onRedis = 0
						return false, body
					}
					return onRedis >= 8, ""
				})
				if got := n.admitted(t, fmt.Sprintf("acme:user%d", i)); got != 2 {
					t.Errorf("node %d admitted %d of a tenant whose override Redis lost, want the policy's 2", i, got)
				}
			}

			if code, out, errOut := nodes[1].overrideCLI(t, "set", "api", "--prefix", "beta:", "--limit", "5"); code != 0 {
				t.Fatalf("override set after the loss: %d %s %s", code, out, errOut)
			}
			testwait.UntilSaw(t, "node 0 enforcing the override set after the loss", func() (bool, string) {
				l := nodes[0].limitOf(t, "beta:probe")
				return l == 5, fmt.Sprint("limit ", l)
			})
			if code, _, errOut := nodes[0].overrideCLI(t, "rm", "api", "--prefix", "acme:"); code != 1 || !strings.Contains(errOut, "no such override") {
				t.Errorf("removing the lost override: %d %q, want no such override", code, errOut)
			}
			late := startNode(t, native)
			if a, b := late.limitOf(t, "acme:probe"), late.limitOf(t, "beta:probe"); a != 2 || b != 5 {
				t.Errorf("a node started after the loss decides acme: under %d and beta: under %d, want 2 and 5", a, b)
			}
		})
	}
}
