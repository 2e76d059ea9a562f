package redisstore

import (
	"crypto/sha1"
	_ "embed" // the Lua sources
	"encoding/hex"

	"github.com/redis/rueidis"
	"github.com/sluicehq/sluice"
)

// The Lua sources. Each algorithm is one file defining ALG.<code>; header.lua
// holds what they share, main.lua runs one request and batch.lua an
// all-or-nothing set of them.
var (
	//go:embed lua/header.lua
	luaHeader string
	//go:embed lua/fixed_window.lua
	luaFixedWindow string
	//go:embed lua/sliding_window.lua
	luaSlidingWindow string
	//go:embed lua/sliding_log.lua
	luaSlidingLog string
	//go:embed lua/token_bucket.lua
	luaTokenBucket string
	//go:embed lua/gcra.lua
	luaGCRA string
	//go:embed lua/leaky_bucket.lua
	luaLeakyBucket string
	//go:embed lua/main.lua
	luaMain string
	//go:embed lua/batch.lua
	luaBatch string
	//go:embed lua/reset.lua
	luaReset string
)

// Script is one of this package's Lua scripts, as a Runner sees it: run it
// with EVALSHA SHA1() and, when the server answers NOSCRIPT (it restarted, or
// SCRIPT FLUSH), with EVAL Source(). The scripts are built once, at start-up.
type Script struct {
	name string
	src  string
	sha1 string
	lua  *rueidis.Lua // the rueidis runner's EVALSHA-then-EVAL wrapper
}

// Name names the script in errors: "fixed_window", ..., or "batch".
func (s *Script) Name() string { return s.name }

// Source is the script's Lua text, for EVAL.
func (s *Script) Source() string { return s.src }

// SHA1 is the hex SHA-1 of Source, for EVALSHA.
func (s *Script) SHA1() string { return s.sha1 }

func newScript(name string, parts ...string) *Script {
	var src string
	for _, p := range parts {
		src += p + "\n"
	}
	sum := sha1.Sum([]byte(src))
	return &Script{name: name, src: src, sha1: hex.EncodeToString(sum[:]), lua: rueidis.NewLuaScript(src)}
}

// single returns the script deciding one request of algorithm a: the header,
// the algorithm's file (the leaky bucket's needs GCRA's), a line naming it as
// `alg`, and main.lua.
func single(a sluice.Algorithm, files ...string) *Script {
	parts := append([]string{luaHeader}, files...)
	parts = append(parts, "local alg = ALG."+algoCode(a), luaMain)
	return newScript(string(a), parts...)
}

var (
	scriptFixedWindow   = single(sluice.FixedWindow, luaFixedWindow)
	scriptSlidingWindow = single(sluice.SlidingWindow, luaSlidingWindow)
	scriptSlidingLog    = single(sluice.SlidingLog, luaSlidingLog)
	scriptTokenBucket   = single(sluice.TokenBucket, luaTokenBucket)
	scriptGCRA          = single(sluice.GCRA, luaGCRA)
	scriptLeakyBucket   = single(sluice.LeakyBucket, luaGCRA, luaLeakyBucket)
	// scriptBatch holds every algorithm, so one script serves any mix.
	scriptBatch = newScript("batch", luaHeader, luaFixedWindow, luaSlidingWindow, luaSlidingLog,
		luaTokenBucket, luaGCRA, luaLeakyBucket, luaBatch)
	scriptReset = newScript("reset", luaReset)
)

// scriptFor returns the single-request script of algorithm a.
func scriptFor(a sluice.Algorithm) *Script {
	switch a {
	case sluice.FixedWindow:
		return scriptFixedWindow
	case sluice.SlidingWindow:
		return scriptSlidingWindow
	case sluice.SlidingLog:
		return scriptSlidingLog
	case sluice.TokenBucket:
		return scriptTokenBucket
	case sluice.LeakyBucket:
		return scriptLeakyBucket
	default:
		return scriptGCRA
	}
}

// Reply layout of the single-request script (main.lua).
const (
	replyAllowed = iota
	replyRemaining
	replyRetry
	replyReset
	replyDelay
	replyRef1
	replyRef2
	replyLen
)

// batchStride is the number of integers per request in the batch reply.
const batchStride = 5

// Modes of the single-request script.
const (
	modeWrite  = "w" // decide and write the admission
	modeDry    = "d" // decide, write nothing, report the peek view
	modeRefund = "r" // undo an admission
)
