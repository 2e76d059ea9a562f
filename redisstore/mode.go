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
	mode atomic.Pointer[Mode] // nil until decided
	mu   sync.Mutex           // one first load at a time
}

// Current returns the mode, or "" before the first load has succeeded or
// been refused.
func (f *Functions) Current() Mode {
	if m := f.mode.Load(); m != nil {
		return *m
	}
	return ""
}

// Mode returns the mode, deciding it first if need be: load (FUNCTION LOAD
// of Library on every server) succeeding means ModeFunctions, refused means
// ModeScripts; another error (Redis unreachable) leaves it undecided.
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
		f.set(ModeFunctions)
	case FunctionsRefused(err):
		f.set(ModeScripts)
	default:
		return "", err
	}
	return f.Current(), nil
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
		f.set(ModeScripts)
		return ModeScripts
	case !FunctionMissing(err):
		return ""
	}
	switch lerr := load(ctx); {
	case lerr == nil:
		return ModeFunctions
	case FunctionsRefused(lerr):
		f.set(ModeScripts)
		return ModeScripts
	}
	return ""
}

func (f *Functions) set(m Mode) { f.mode.Store(&m) }

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
	msg := err.Error()
	for _, s := range []string{"unknown command", "unknown subcommand", "NOPERM", "not allowed", "not supported"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// LoadResult sums up FUNCTION LOAD of the library on every node, given each
// node's error (nil: loaded): a refusal anywhere is returned as is (see
// FunctionsRefused: the store then uses scripts); otherwise one node that
// loaded it is success — a node down now loads it on the retry after it
// answers that the function is missing — and a replica's READONLY does not
// count (it gets the library from its master).
func LoadResult(errs map[string]error) error {
	var failed []error
	loaded := false
	for node, err := range errs {
		switch {
		case err == nil:
			loaded = true
		case FunctionsRefused(err):
			return fmt.Errorf("FUNCTION LOAD on %s: %w", node, err)
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
