package redistest

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	createTimeout  = 60 * time.Second // redis-cli --cluster create
	clusterTimeout = 30 * time.Second // until every node agrees the cluster is healthy
)

// Cluster is a Redis Cluster of real processes owned by a test. Nodes are in
// start order, and redis-cli --cluster create makes the first `masters` of
// them masters; fail-over changes roles, so ask Masters for the current ones.
type Cluster struct {
	// Nodes are all the cluster's servers; Kill, Pause and Restart on them to
	// inject faults.
	Nodes []*Server

	t testing.TB
}

// StartCluster starts masters masters with replicas replicas each (masters >=
// 3, as Redis requires), joins them with `redis-cli --cluster create`, and
// returns once every node reports cluster_state:ok with all 16384 slots
// assigned, sees every other node in its role, and every replica's link to
// its master is up — so a test can kill a master at once and see a fail-over.
// cluster-node-timeout is 1000 ms so fail-overs take a second or two. opts
// apply to every node (e.g. WithArgs("--cluster-require-full-coverage",
// "no")). All processes are killed by t.Cleanup.
func StartCluster(t testing.TB, masters, replicas int, opts ...Option) *Cluster {
	t.Helper()
	requireRedis(t)
	if masters < 3 || replicas < 0 {
		t.Fatalf("redistest: StartCluster(%d, %d): Redis Cluster needs at least 3 masters and replicas >= 0", masters, replicas)
	}
	c := &Cluster{t: t}
	for range masters * (1 + replicas) {
		c.Nodes = append(c.Nodes, Start(t, append([]Option{withCluster()}, opts...)...))
	}

	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	if out, err := runCLI(createTimeout, args...); err != nil {
		t.Fatalf("redistest: %v\n%s", err, out)
	}

	deadline := time.Now().Add(clusterTimeout)
	for {
		problem := c.notReady(masters)
		if problem == "" {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("redistest: cluster not ready after %v: %s", clusterTimeout, problem)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// notReady returns what is still missing for the freshly created cluster to
// be usable, or "" when nothing is.
func (c *Cluster) notReady(masters int) string {
	for _, n := range c.Nodes {
		info, err := n.Do("CLUSTER", "INFO")
		if err != nil {
			return err.Error()
		}
		fields := infoFields(info)
		if fields["cluster_state"] != "ok" ||
			fields["cluster_slots_assigned"] != "16384" ||
			fields["cluster_known_nodes"] != strconv.Itoa(len(c.Nodes)) {
			return fmt.Sprintf("%s: cluster_state:%s cluster_slots_assigned:%s cluster_known_nodes:%s",
				n.Addr(), fields["cluster_state"], fields["cluster_slots_assigned"], fields["cluster_known_nodes"])
		}
		out, err := n.Do("CLUSTER", "NODES")
		if err != nil {
			return err.Error()
		}
		entries := parseNodes(out)
		var nMasters int
		var self clusterNode
		for _, e := range entries {
			if e.has("handshake") || e.has("noaddr") || e.has("fail") || e.has("fail?") {
				return fmt.Sprintf("%s sees %s as %s", n.Addr(), e.addr, strings.Join(e.flags, ","))
			}
			if e.has("master") {
				nMasters++
			}
			if e.has("myself") {
				self = e
			}
		}
		if nMasters != masters {
			return fmt.Sprintf("%s sees %d masters, want %d", n.Addr(), nMasters, masters)
		}
		if self.has("slave") {
			repl, err := n.Do("INFO", "replication")
			if err != nil {
				return err.Error()
			}
			if st := infoFields(repl)["master_link_status"]; st != "up" {
				return fmt.Sprintf("replica %s: master_link_status:%s", n.Addr(), st)
			}
		}
	}
	return ""
}

// Addrs are the "127.0.0.1:PORT" addresses of all nodes, in Nodes order.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		addrs[i] = n.Addr()
	}
	return addrs
}

// URL lists every node in the rueidis convention, the first as host and the
// rest as addr parameters: "redis://127.0.0.1:P1?addr=127.0.0.1:P2&addr=...",
// so the client can bootstrap from any node that is still up.
func (c *Cluster) URL() string {
	addrs := c.Addrs()
	var b strings.Builder
	b.WriteString("redis://")
	for i, a := range addrs {
		switch i {
		case 0:
			b.WriteString(a)
		case 1:
			b.WriteString("?addr=" + a)
		default:
			b.WriteString("&addr=" + a)
		}
	}
	return b.String()
}

// Masters returns the current masters, in Nodes order, as the first running
// and unpaused node sees them in CLUSTER NODES: nodes flagged master and not
// flagged fail (a master merely suspected, "fail?", is still one until a
// replica takes over). Right after a fault views differ between nodes and
// change as gossip spreads, so poll it until it shows what the test expects.
// It fails the test if no node answers; call it from the test goroutine.
func (c *Cluster) Masters() []*Server {
	c.t.Helper()
	var lastErr error
	for _, n := range c.Nodes {
		if !n.serving() {
			continue
		}
		out, err := n.Do("CLUSTER", "NODES")
		if err != nil {
			lastErr = err
			continue
		}
		byPort := make(map[int]bool)
		for _, e := range parseNodes(out) {
			if e.has("master") && !e.has("fail") && !e.has("noaddr") {
				byPort[e.port] = true
			}
		}
		var ms []*Server
		for _, m := range c.Nodes {
			if byPort[m.Port()] {
				ms = append(ms, m)
			}
		}
		return ms
	}
	c.t.Fatalf("redistest: Masters: no node answered CLUSTER NODES (last error: %v)", lastErr)
	return nil
}

// clusterNode is one line of CLUSTER NODES, as far as this package needs it.
type clusterNode struct {
	addr  string // "127.0.0.1:PORT"
	port  int
	flags []string
}

func (n clusterNode) has(flag string) bool {
	for _, f := range n.flags {
		if f == flag {
			return true
		}
	}
	return false
}

// parseNodes parses CLUSTER NODES output:
// <id> <ip:port@cport[,hostname]> <flags> <master> <ping> <pong> <epoch> <link> <slots>...
func parseNodes(out string) []clusterNode {
	var nodes []clusterNode
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		addr, _, _ = strings.Cut(addr, ",")
		n := clusterNode{addr: addr, flags: strings.Split(f[2], ",")}
		if _, p, err := net.SplitHostPort(addr); err == nil {
			n.port, _ = strconv.Atoi(p)
		}
		nodes = append(nodes, n)
	}
	return nodes
}

// infoFields parses "key:value" lines of INFO / CLUSTER INFO output.
func infoFields(out string) map[string]string {
	m := make(map[string]string)
	for _, line := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			m[k] = v
		}
	}
	return m
}
