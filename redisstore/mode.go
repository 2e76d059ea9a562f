package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
)

// Mode is how the store runs its Lua on the server.
type Mode string

const (
	// ModeFunctions: the library is loaded once per server (FUNCTION LOAD)
	// and each decision is an FCALL, which runs only its function. Redis 7+.
	ModeFunctions Mode = "functions"
	// ModeScripts: each decision is an EVALSHA (EVAL after NOSCRIPT), which
	// runs the whole script: the fall-back where Functions are unavailable
	// (Redis < 7, or FUNCTION refused by ACL or a managed service).
	ModeScripts Mode = "scripts"
)

// Functions is the part of a Runner that chooses between FCALL and EVALSHA:
// the first call (or Mode) loads the library; a server that refuses it makes
// every later call use scripts. A library the server lost (FUNCTION FLUSH, a
// restart with no data) is loaded again and the call retried once. Runners
// of other client libraries (package redisstore/goredis) embed it. The zero
// value is ready to use.
type Functions struct {
	mode atomic.Pointer[decision] // nil until decided
	mu   sync.Mutex               // one first load at a time
}

// decision is a mode and why it was chosen.
type decision struct {
	mode Mode
	why  string
}

// Current returns the mode, or "" before the first load has succeeded or
// been refused.
func (f *Functions) Current() Mode {
	if d := f.mode.Load(); d != nil {
		return d.mode
	}
	return ""
}

// Reason says why the mode was chosen — the server accepted the library, or
// its answer refusing it — or "" before it is decided.
func (f *Functions) Reason() string {
	if d := f.mode.Load(); d != nil {
		return d.why
	}
	return ""
}

// Mode returns the mode, deciding it first if need be: load (FUNCTION LOAD
// of Library on every server) succeeding means ModeFunctions; refused — any
// error the server answers, see LoadResult — means ModeScripts; not reaching
// the server leaves it undecided.
func (f *Functions) Mode(ctx context.Context, load func(context.Context) error) (Mode, error) {
	if m := f.Current(); m != "" {
		return m, nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if m := f.Current(); m != "" {
		return m, nil
	}
	err := load(ctx)
	switch {
	case err == nil:
		f.set(ModeFunctions, "the server loaded the function library (Redis 7+)")
	case FunctionsRefused(err):
		f.set(ModeScripts, err.Error())
	default:
		return "", err
	}
	return f.Current(), nil
}

// maxLoads bounds how often one call loads the library again: a library
// flushed again between its load and the call (FUNCTION FLUSH in a loop, a
// failover in between) is loaded once more, while a server that loses it
// every time ends the call with its error.
const maxLoads = 3

// Call runs fcall, an FCALL, and again each time Retry has loaded the
// library it lacked, up to maxLoads times. It returns ModeScripts when the
// call must be run as a script instead (the server refuses Functions), else
// "" and fcall's last error.
func (f *Functions) Call(ctx context.Context, load func(context.Context) error, fcall func() error) (Mode, error) {
	err := fcall()
	for range maxLoads {
		switch f.Retry(ctx, err, load) {
		case ModeFunctions:
			err = fcall()
		case ModeScripts:
			return ModeScripts, nil
		default:
			return "", err
		}
	}
	return "", err
}

// RetryMulti is Call for a batch: again are the calls of a batch that
// failed for want of the library (as run returns them); each round loads it
// and runs them again with run, up to maxLoads times, or hands them to
// scripts when the server refuses Functions now. errOf returns a call's
// error.
func (f *Functions) RetryMulti(ctx context.Context, load func(context.Context) error, again []int,
	errOf func(int) error, run func([]int) []int, scripts func([]int)) {
	for range maxLoads {
		if len(again) == 0 {
			return
		}
		switch f.Retry(ctx, errOf(again[0]), load) {
		case ModeFunctions:
			again = run(again)
		case ModeScripts:
			scripts(again)
			return
		default:
			return
		}
	}
}

// Retry tells what to do after an FCALL failed with err: run it again as
// FCALL (ModeFunctions: the library was missing and is loaded again), as a
// script (ModeScripts: the server refuses Functions now, and every later
// call uses scripts), or neither ("": err stands).
func (f *Functions) Retry(ctx context.Context, err error, load func(context.Context) error) Mode {
	switch {
	case err == nil:
		return ""
	case FunctionsRefused(err):
		f.set(ModeScripts, "FCALL: "+err.Error())
		return ModeScripts
	case !FunctionMissing(err):
		return ""
	}
	switch lerr := load(ctx); {
	case lerr == nil:
		return ModeFunctions
	case FunctionsRefused(lerr):
		f.set(ModeScripts, lerr.Error())
		return ModeScripts
	}
	return ""
}

func (f *Functions) set(m Mode, why string) { f.mode.Store(&decision{m, why}) }

// FunctionMissing reports whether err is a server's answer that the function
// called does not exist: the library was never loaded there, or was lost.
func FunctionMissing(err error) bool {
	return err != nil && strings.Contains(err.Error(), "Function not found")
}

// FunctionsRefused reports whether err is a server's refusal of FUNCTION or
// FCALL: a Redis older than 7 (unknown command), an ACL (NOPERM), or a
// managed service that disables the command.
func FunctionsRefused(err error) bool {
	if err == nil {
		return false
	}
	if _, ok := errors.AsType[*loadRefused](err); ok {
		return true
	}
	msg := err.Error()
	for _, s := range []string{"unknown command", "unknown subcommand", "NOPERM", "not allowed", "not supported"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// ServerReply marks err (when not nil) as the server's own error reply to
// FUNCTION LOAD, rather than a failure to reach it, for LoadResult: a
// Runner's load wraps the errors its client reports as replies.
func ServerReply(err error) error {
	if err == nil {
		return nil
	}
	return &serverReply{err}
}

type serverReply struct{ err error }

func (e *serverReply) Error() string { return e.err.Error() }
func (e *serverReply) Unwrap() error { return e.err }

// loadRefused is LoadResult's refusal: FunctionsRefused, whatever it says.
type loadRefused struct{ err error }

func (e *loadRefused) Error() string { return e.err.Error() }
func (e *loadRefused) Unwrap() error { return e.err }

// transientReplies start the replies of a server that cannot answer now but
// will (loading, busy, failing over): they leave the mode undecided, as an
// unreachable server does, and the next call tries again.
var transientReplies = []string{"LOADING", "BUSY", "TRYAGAIN", "CLUSTERDOWN", "MASTERDOWN", "READONLY"}

// refusal reports whether err, one node's FUNCTION LOAD error, makes the
// store use scripts: a known refusal (FunctionsRefused), or any other reply
// of the server (ServerReply) that is not transient — another Redis flavour,
// a renamed or disabled command, a function name taken by another library.
// Deciding is what matters: an undecided mode would try FUNCTION LOAD again
// on every call and fail each one, while scripts work wherever EVAL does.
func refusal(err error) bool {
	if FunctionsRefused(err) {
		return true
	}
	if _, ok := errors.AsType[*serverReply](err); !ok {
		return false
	}
	msg := err.Error()
	for _, p := range transientReplies {
		if strings.HasPrefix(msg, p) {
			return false
		}
	}
	return true
}

// LoadResult sums up FUNCTION LOAD of the library on every node, given each
// node's error (nil: loaded): a refusal anywhere (see refusal) is returned
// as one that FunctionsRefused reports, and the store then uses scripts;
// otherwise one node that loaded it is success — a node down now loads it on
// the retry after it answers that the function is missing — and a replica's
// READONLY does not count (it gets the library from its master).
func LoadResult(errs map[string]error) error {
	var failed []error
	loaded := false
	for node, err := range errs {
		switch {
		case err == nil:
			loaded = true
		case refusal(err):
			return &loadRefused{fmt.Errorf("FUNCTION LOAD on %s: %w", node, err)}
		case !strings.Contains(err.Error(), "READONLY"):
			failed = append(failed, fmt.Errorf("FUNCTION LOAD on %s: %w", node, err))
		}
	}
	switch {
	case loaded:
		return nil
	case len(failed) == 0:
		return errors.New("FUNCTION LOAD: no node to load the library on")
	}
	return errors.Join(failed...)
}

// modeReasoner is a Runner that says why it runs in its mode, as this
// package's and package goredis's do.
type modeReasoner interface{ ModeReason() string }

// ModeReason says why Mode is what it is — the server loaded the library, or
// the answer that refused it — for a service to log next to the mode; ""
// before Mode is decided, or for a Runner that does not say.
func (s *Store) ModeReason() string { return modeReason(s.run) }

func modeReason(r Runner) string {
	if mr, ok := r.(modeReasoner); ok {
		return mr.ModeReason()
	}
	return ""
}
