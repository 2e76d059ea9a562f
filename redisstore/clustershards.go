package redisstore

import (
	"context"
	"net"
	"strconv"

	"github.com/redis/rueidis"
)

// readSlotMap asks one node for the slot map: CLUSTER SHARDS (Redis 7+),
// which names each shard's master with its role and health, or CLUSTER
// SLOTS once a server has refused SHARDS (an older Redis, or an ACL that
// forbids it): from then on this store asks every node for SLOTS. nodes are
// the client's node addresses, which tell a TLS port from a plain one.
func (n *clusterNodes) readSlotMap(ctx context.Context, addr string, node rueidis.Client, nodes map[string]rueidis.Client) ([]slotRange, error) {
	if !n.noShards.Load() {
		reply, err := node.Do(ctx, node.B().ClusterShards().Build()).ToArray()
		if err == nil {
			known := func(a string) bool { _, ok := nodes[a]; return ok }
			return shardRanges(readShards(reply), addr, known), nil
		}
		if _, refused := rueidis.IsRedisErr(err); !refused {
			return nil, err // no answer: ask the next node
		}
		n.noShards.Store(true)
	}
	reply, err := node.Do(ctx, node.B().ClusterSlots().Build()).ToArray()
	if err != nil {
		return nil, err
	}
	return slotRanges(reply, addr), nil
}

// shardInfo is one shard of a CLUSTER SHARDS reply.
type shardInfo struct {
	slots []int64 // from, to pairs
	nodes []shardNode
}

// shardNode is one node of a shard.
type shardNode struct {
	endpoint, role, health string
	port, tlsPort          int64
}

// readShards reads a CLUSTER SHARDS reply: per shard a map of "slots" (a
// flat list of from, to pairs) and "nodes" (maps with "endpoint", "port",
// "tls-port", "role" and "health"). What it cannot read is left out.
func readShards(reply []rueidis.RedisMessage) []shardInfo {
	shards := make([]shardInfo, 0, len(reply))
	for _, s := range reply {
		m, err := s.AsMap()
		if err != nil {
			continue
		}
		var sh shardInfo
		slots, nodes := m["slots"], m["nodes"]
		bounds, _ := slots.ToArray()
		for _, b := range bounds {
			if v, err := b.AsInt64(); err == nil {
				sh.slots = append(sh.slots, v)
			}
		}
		entries, _ := nodes.ToArray()
		for _, e := range entries {
			if n, err := e.AsMap(); err == nil {
				port, tls := n["port"], n["tls-port"]
				sh.nodes = append(sh.nodes, shardNode{endpoint: str(n["endpoint"]), role: str(n["role"]),
					health: str(n["health"]), port: integer(port), tlsPort: integer(tls)})
			}
		}
		shards = append(shards, sh)
	}
	return shards
}

// shardRanges gives each shard's slots to its node whose role is master, an
// online one first: a master that failed or is loading keeps its slots, and
// its breaker is the one its calls open, until the Cluster promotes a replica
// (which then shows as the shard's master). A shard with no master known, or
// whose endpoint is "?", is left out, so its slots keep the owner they had.
// An empty endpoint is the host of addr, the node that answered. known
// tells whether the client knows a node by an address (a TLS port or a
// plain one).
func shardRanges(shards []shardInfo, addr string, known func(string) bool) []slotRange {
	var ranges []slotRange
	for _, sh := range shards {
		master := sh.master(addr, known)
		if master == "" {
			continue
		}
		for i := 0; i+1 < len(sh.slots); i += 2 {
			ranges = append(ranges, slotRange{from: sh.slots[i], to: sh.slots[i+1], master: master})
		}
	}
	return ranges
}

// master returns the address of the shard's master, "" when it has none
// (or its address is unknown).
func (sh shardInfo) master(addr string, known func(string) bool) string {
	master := ""
	for _, n := range sh.nodes {
		if n.role != "master" {
			continue
		}
		a := n.addr(addr, known)
		if a == "" {
			continue
		}
		if n.health == "online" {
			return a
		}
		if master == "" {
			master = a
		}
	}
	return master
}

// addr is the node's "host:port" as the client reaches it: its endpoint
// (the host of addr when empty, unknown when "?") with its plain port, or
// its TLS port when the client knows it by that one or it has no plain port.
func (n shardNode) addr(addr string, known func(string) bool) string {
	host := n.endpoint
	switch host {
	case "?":
		return ""
	case "":
		host, _, _ = net.SplitHostPort(addr)
	}
	if n.tlsPort > 0 {
		tls := net.JoinHostPort(host, strconv.FormatInt(n.tlsPort, 10))
		if n.port <= 0 || known(tls) {
			return tls
		}
	}
	if n.port <= 0 {
		return ""
	}
	return net.JoinHostPort(host, strconv.FormatInt(n.port, 10))
}

// integer is m as an integer, 0 when it is not one (or missing).
func integer(m rueidis.RedisMessage) int64 {
	v, _ := m.AsInt64()
	return v
}

// str is m as a string, "" when it is not one (or missing).
func str(m rueidis.RedisMessage) string {
	s, _ := m.ToString()
	return s
}
