package failover_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/redistest"
)

// mustDo runs a redis-cli command on srv.
func mustDo(t *testing.T, srv *redistest.Server, args ...string) string {
	t.Helper()
	out, err := srv.Do(args...)
	if err != nil {
		t.Fatalf("redis-cli %v on %s: %v", args, srv.Addr(), err)
	}
	return out
}

// clusterNode is one line of CLUSTER NODES.
type clusterNode struct {
	id, master string
	port       int
	flags      []string
	slots      [][2]int
}

func (n clusterNode) is(flag string) bool { return slices.Contains(n.flags, flag) }

// clusterNodes returns CLUSTER NODES as the first node that answers sees it.
func clusterNodes(t *testing.T, c *redistest.Cluster) []clusterNode {
	t.Helper()
	var lastErr error
	for _, srv := range c.Nodes {
		out, err := srv.Do("CLUSTER", "NODES")
		if err != nil {
			lastErr = err
			continue
		}
		var nodes []clusterNode
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if len(f) < 8 {
				continue
			}
			addr, _, _ := strings.Cut(f[1], "@")
			_, portStr, _ := strings.Cut(addr, ":")
			port, _ := strconv.Atoi(portStr)
			n := clusterNode{id: f[0], master: f[3], port: port, flags: strings.Split(f[2], ",")}
			for _, r := range f[8:] {
				if strings.HasPrefix(r, "[") {
					continue // a slot being migrated
				}
				lo, hi, found := strings.Cut(r, "-")
				a, _ := strconv.Atoi(lo)
				b := a
				if found {
					b, _ = strconv.Atoi(hi)
				}
				n.slots = append(n.slots, [2]int{a, b})
			}
			nodes = append(nodes, n)
		}
		return nodes
	}
	t.Fatalf("no cluster node answered CLUSTER NODES: %v", lastErr)
	return nil
}

// slotOwner returns the healthy master serving slot in nodes, if any.
func slotOwner(nodes []clusterNode, slot int) (clusterNode, bool) {
	for _, n := range nodes {
		if !n.is("master") || n.is("fail") || n.is("fail?") {
			continue
		}
		for _, r := range n.slots {
			if slot >= r[0] && slot <= r[1] {
				return n, true
			}
		}
	}
	return clusterNode{}, false
}

// serverOn returns the cluster's server listening on port.
func serverOn(t *testing.T, c *redistest.Cluster, port int) *redistest.Server {
	t.Helper()
	for _, srv := range c.Nodes {
		if srv.Port() == port {
			return srv
		}
	}
	t.Fatalf("no cluster node on port %d", port)
	return nil
}
