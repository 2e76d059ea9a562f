package redisstore

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
)

// Runner runs this package's scripts on a Redis client. The Store builds on
// it, so a client library needs only a Runner to get the same scripts and
// semantics: Open and New use rueidis; package redisstore/goredis adapts
// go-redis. Implementations must be safe for concurrent use, and must not
// keep the slices they are given once a call returns: the Store reuses them.
type Runner interface {
	// Run runs s once with keys and args — FCALL of its function where the
	// server has Functions (see Functions), else EVALSHA, then EVAL on
	// NOSCRIPT — and copies its reply, an array of integers, into reply, which has
	// exactly the reply's length (a reply of another length is an error).
	Run(ctx context.Context, s *Script, keys, args []string, reply []int64) error
	// RunMulti runs every call, sending them together (pipelined) rather than
	// one round trip after another, and sets each call's Reply and Err.
	RunMulti(ctx context.Context, calls []Call)
	// Colocated reports whether one script may access all of keys: always on
	// a single Redis; on a Cluster when they hash to one slot (see Slot).
	// Answering false is always safe, only slower.
	Colocated(keys []string) bool
	// Mode reports whether the scripts run as functions or as scripts,
	// loading the function library first if no call has decided it yet.
	Mode(ctx context.Context) (Mode, error)
}

// Call is one script run of Runner.RunMulti.
type Call struct {
	Script *Script
	Keys   []string
	Args   []string
	// Reply receives the script's integer array reply; it has the reply's
	// exact length.
	Reply []int64
	// Err is set by RunMulti when the run failed.
	Err error
}

// DecodeReply copies a reply that the scripts packed into a string — one
// little-endian double per value, each an integer below 2^53 — into reply,
// for a Runner. A reply of another length is an error.
func DecodeReply(packed string, reply []int64) error {
	if len(packed) != 8*len(reply) {
		return fmt.Errorf("script replied %d bytes, want %d values", len(packed), len(reply))
	}
	for i := range reply {
		bits := binary.LittleEndian.Uint64([]byte(packed[8*i : 8*i+8]))
		reply[i] = int64(math.Float64frombits(bits))
	}
	return nil
}
