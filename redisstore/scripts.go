package redisstore

import (
	"crypto/sha1"
	_ "embed" // the Lua sources
	"encoding/hex"
	"strings"

	"github.com/redis/rueidis"
	"github.com/sluicehq/sluice"
)

// The Lua sources. Each algorithm is one file defining ALG.<code>; header.lua
// holds what they share, main.lua runs one request (the cross-slot path's dry
// runs, reservations and refunds) and batch.lua a batch of requests and
// all-or-nothing sets. slots.lua acquires and releases the slots of
// concurrency policies.
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
	//go:embed lua/slots.lua
	luaSlots string
	//go:embed lua/board.lua
	luaBoard string
)

// Script is one of this package's Lua programs, as a Runner sees it. On a
// server with Redis Functions (Redis 7+) it is a function of the library
// (Library): run it with FCALL Function(), after loading the library once per
// server with FUNCTION LOAD. Elsewhere it is a script: run it with EVALSHA
// SHA1() and, when the server answers NOSCRIPT (it restarted, or SCRIPT
// FLUSH), with EVAL Source(). Both are built once, at start-up, from the same
// Lua files.
type Script struct {
	name string
	src  string
	sha1 string
	fn   string
	lua  *rueidis.Lua // the rueidis runner's EVALSHA-then-EVAL wrapper
}

// Name names the script in errors: "fixed_window", ..., "batch", "reset",
// "acquire" or "release".
func (s *Script) Name() string { return s.name }

// Source is the script's Lua text, for EVAL.
func (s *Script) Source() string { return s.src }

// SHA1 is the hex SHA-1 of Source, for EVALSHA.
func (s *Script) SHA1() string { return s.sha1 }

// Function is the name of the script's function in the library, for FCALL.
func (s *Script) Function() string { return s.fn }

// library is the function library: every Lua file, loaded once per server so
// that a call runs only its function, not the whole chunk as a script does.
// Its name carries a hash of its code, so that processes running different
// versions of Sluice on one Redis each find their own functions.
var library = buildLibrary()

// Library returns the name and the source of the function library, for
// FUNCTION LOAD (REPLACE is safe: a name always comes with the same code).
func Library() (name, source string) { return library.name, library.src }

type lib struct{ name, src string }

// body is the Lua every script and the library share: the header and every
// algorithm (the leaky bucket's file needs GCRA's), then the entry points.
func body() []string {
	files := []string{luaHeader, luaFixedWindow, luaSlidingWindow, luaSlidingLog,
		luaTokenBucket, luaGCRA, luaLeakyBucket, luaMain, luaReserve, luaBatch, luaReset, luaSlots, luaBoard}
	return append(files, chargeFiles()...)
}

func buildLibrary() lib {
	code := join(body())
	sum := sha1.Sum([]byte(code))
	name := "sluice_" + hex.EncodeToString(sum[:8])
	src := "#!lua name=" + name + "\nlocal PXAT = true\n" + code
	for _, s := range allScripts() {
		src += "redis.register_function('" + name + "_" + s.code + "', function(keys, argv) return " + s.call("keys", "argv") + " end)\n"
	}
	return lib{name: name, src: src}
}

// entry is one entry point: a script and a function.
type entry struct {
	name, code string
	files      []string // the files its script is made of
}

// call is the Lua expression running the entry point on keys and argv.
func (e entry) call(keys, argv string) string {
	switch e.code {
	case "batch":
		return "decide_batch(" + keys + ", " + argv + ")"
	case "reset":
		return "reset_key(" + keys + ")"
	case "charge_batch":
		return "charge_batch(" + keys + ", " + argv + ")"
	case "acquire":
		return "acquire_slot(" + keys + ", " + argv + ")"
	case "release":
		return "release_slot(" + keys + ", " + argv + ")"
	case "board_post":
		return "board_post(" + keys + ", " + argv + ")"
	case "board_read":
		return "board_read(" + keys + ", " + argv + ")"
	}
	if alg, ok := strings.CutSuffix(e.code, chargeSuffix); ok {
		return "charge_one(ALG." + alg + ", " + keys + ", " + argv + ")"
	}
	if strings.HasSuffix(e.code, batchSuffix) {
		return "decide_batch(" + keys + ", " + argv + ")"
	}
	if alg, ok := strings.CutSuffix(e.code, reserveSuffix); ok {
		return "reserve_one(ALG." + alg + ", " + keys + ", " + argv + ")"
	}
	return "decide_one(ALG." + e.code + ", " + keys + ", " + argv + ")"
}

func allScripts() []entry {
	var es []entry
	for _, a := range sluice.Algorithms {
		files := []string{luaHeader, algoFile(a), luaMain}
		if a == sluice.LeakyBucket {
			files = []string{luaHeader, luaGCRA, luaLeakyBucket, luaMain}
		}
		es = append(es, entry{name: string(a), code: algoCode(a), files: files})
		// Batches make reservations too (reserve.lua's reserve_held).
		batch := append(files[:len(files)-1:len(files)-1], luaReserve, luaBatch)
		es = append(es, entry{name: string(a) + batchSuffix, code: algoCode(a) + batchSuffix, files: batch})
		if sluice.Reservable(a) {
			reserve := append(files[:len(files)-1:len(files)-1], luaReserve)
			es = append(es, entry{name: string(a) + reserveSuffix, code: algoCode(a) + reserveSuffix, files: reserve})
		}
	}
	// One script for any mix of algorithms: every algorithm, then the
	// batch's entry point.
	every := []string{luaHeader, luaFixedWindow, luaSlidingWindow, luaSlidingLog, luaTokenBucket, luaGCRA, luaLeakyBucket}
	es = append(es, entry{name: "batch", code: "batch", files: append(every[:len(every):len(every)], luaReserve, luaBatch)},
		entry{name: "reset", code: "reset", files: []string{luaReset}},
		entry{name: "acquire", code: "acquire", files: []string{luaHeader, luaSlots}},
		entry{name: "release", code: "release", files: []string{luaHeader, luaSlots}},
		entry{name: "board_post", code: "board_post", files: []string{luaBoard}},
		entry{name: "board_read", code: "board_read", files: []string{luaBoard}})
	return append(es, chargeEntries()...)
}

func algoFile(a sluice.Algorithm) string {
	switch a {
	case sluice.FixedWindow:
		return luaFixedWindow
	case sluice.SlidingWindow:
		return luaSlidingWindow
	case sluice.SlidingLog:
		return luaSlidingLog
	case sluice.TokenBucket:
		return luaTokenBucket
	case sluice.LeakyBucket:
		return luaLeakyBucket
	default:
		return luaGCRA
	}
}

// newScript builds entry e's script: its files and the call. Redis < 5 must
// be told to replicate effects, as the scripts read TIME; later versions
// always do (and have no replicate_commands in functions).
func newScript(e entry) *Script {
	parts := append([]string{"local PXAT = false"}, e.files...)
	parts = append(parts,
		"if redis.replicate_commands then redis.replicate_commands() end",
		"return "+e.call("KEYS", "ARGV"))
	src := join(parts)
	sum := sha1.Sum([]byte(src))
	return &Script{name: e.name, src: src, sha1: hex.EncodeToString(sum[:]),
		fn: library.name + "_" + e.code, lua: rueidis.NewLuaScript(src)}
}

func join(parts []string) string {
	var src string
	for _, p := range parts {
		src += p + "\n"
	}
	return src
}

var scripts = func() map[string]*Script {
	m := map[string]*Script{}
	for _, e := range allScripts() {
		m[e.code] = newScript(e)
	}
	return m
}()

var (
	scriptFixedWindow   = scripts["fw"]
	scriptSlidingWindow = scripts["sw"]
	scriptSlidingLog    = scripts["sl"]
	scriptTokenBucket   = scripts["tb"]
	scriptGCRA          = scripts["gc"]
	scriptLeakyBucket   = scripts["lb"]
	// scriptBatch holds every algorithm, so one script serves any mix.
	scriptBatch = scripts["batch"]
	scriptReset = scripts["reset"]
	// scriptChargeBatch holds every algorithm's charge, for any mix of charges.
	scriptChargeBatch = scripts["charge_batch"]
	// scriptAcquire and scriptRelease hold the slots of concurrency
	// policies (slots.go).
	scriptAcquire = scripts["acquire"]
	scriptRelease = scripts["release"]
)

// batchSuffix marks the batch scripts holding one algorithm: as scripts
// (EVALSHA) they run a smaller chunk than scriptBatch, which holds them all.
const batchSuffix = "_batch"

// batchScriptFor returns the batch script of requests all of algorithm a.
func batchScriptFor(a sluice.Algorithm) *Script { return scripts[algoCode(a)+batchSuffix] }

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
	case sluice.GCRA:
		return scriptGCRA
	}
	panic(unknownAlgorithm(a))
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
