package redisstore_test

import (
	"context"
	"errors"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/redisstore/internal/rstest"
)

// calls returns how many times the server ran cmd ("fcall", "evalsha").
func calls(t *testing.T, srv *redistest.Server, cmd string) int {
	t.Helper()
	out, err := srv.Do("INFO", "commandstats")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+cmd+":calls="); ok {
			n, err := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	return 0
}

// decideSome makes n admitted decisions of every algorithm on s.
func decideSome(t *testing.T, s *redisstore.Store, n int) {
	t.Helper()
	for _, a := range sluice.Algorithms {
		p := &sluice.Policy{Name: "mode", Algorithm: a, Limit: 1000, Period: time.Minute}
		for i := range n {
			r, err := s.Decide(context.Background(), sluice.Request{Policy: p, Key: "k", Cost: 1})
			if err != nil || !r.Allowed {
				t.Fatalf("%s decision %d: %+v, %v", a, i, r, err)
			}
		}
	}
}

// testModeFunctions: on Redis 7 the store loads its library and decides by
// FCALL only; after FUNCTION FLUSH it loads the library again and goes on.
func testModeFunctions(t *testing.T, srv *redistest.Server, c rueidis.Client) {
	s := redisstore.New(c, rstest.Defaults()...)
	m, err := s.Mode(context.Background())
	if err != nil || m != redisstore.ModeFunctions {
		t.Fatalf("Mode = %q, %v; want %q", m, err, redisstore.ModeFunctions)
	}
	fcalls, evalshas := calls(t, srv, "fcall"), calls(t, srv, "evalsha")
	decideSome(t, s, 3)
	if got := calls(t, srv, "fcall") - fcalls; got != 3*len(sluice.Algorithms) {
		t.Errorf("%d FCALLs for %d decisions", got, 3*len(sluice.Algorithms))
	}
	if got := calls(t, srv, "evalsha") - evalshas; got != 0 {
		t.Errorf("%d EVALSHAs in functions mode", got)
	}
	if _, err := srv.Do("FUNCTION", "FLUSH"); err != nil {
		t.Fatal(err)
	}
	decideSome(t, s, 1)
	name, _ := redisstore.Library()
	if out, err := srv.Do("FUNCTION", "LIST", "LIBRARYNAME", name); err != nil || !strings.Contains(out, name) {
		t.Errorf("FUNCTION LIST after a flush and a decision: %q, %v; want library %s loaded again", out, err, name)
	}
	if m, _ := s.Mode(context.Background()); m != redisstore.ModeFunctions {
		t.Errorf("Mode after FUNCTION FLUSH = %q", m)
	}
}

// testModeCluster: every master holds the library once the mode is known.
func testModeCluster(t *testing.T, cl *redistest.Cluster, c rueidis.Client) {
	s := redisstore.New(c, rstest.Defaults()...)
	if m, err := s.Mode(context.Background()); err != nil || m != redisstore.ModeFunctions {
		t.Fatalf("Mode = %q, %v; want %q", m, err, redisstore.ModeFunctions)
	}
	name, _ := redisstore.Library()
	for _, n := range cl.Masters() {
		if out, err := n.Do("FUNCTION", "LIST", "LIBRARYNAME", name); err != nil || !strings.Contains(out, name) {
			t.Errorf("master %s: FUNCTION LIST: %q, %v; want library %s", n.Addr(), out, err, name)
		}
	}
	decideSome(t, s, 2)
}

// TestScriptsMode: a user whose ACL refuses FUNCTION and FCALL gets the
// scripts (EVALSHA) fall-back, chosen by itself, which passes the same suite.
func TestScriptsMode(t *testing.T) {
	srv := redistest.Start(t)
	if _, err := srv.Do("ACL", "SETUSER", "nofunc", "on", ">pw", "~*", "&*", "+@all", "-function", "-fcall", "-fcall_ro"); err != nil {
		t.Fatal(err)
	}
	u := url.URL{Scheme: "redis", Host: srv.Addr(), User: url.UserPassword("nofunc", "pw")}
	c := newClient(t, u.String())
	tg := target(c)
	s := tg.New(t)
	if m, err := s.Mode(context.Background()); err != nil || m != redisstore.ModeScripts {
		t.Fatalf("Mode = %q, %v; want %q", m, err, redisstore.ModeScripts)
	}
	evalshas := calls(t, srv, "evalsha")
	decideSome(t, s, 2)
	if got := calls(t, srv, "evalsha") - evalshas; got != 2*len(sluice.Algorithms) {
		t.Errorf("%d EVALSHAs for %d decisions", got, 2*len(sluice.Algorithms))
	}
	t.Run("Conformance", func(t *testing.T) { rstest.Conformance(t, tg) })
	t.Run("Differential", func(t *testing.T) { rstest.Differential(t, tg, 500, false) })
	t.Run("NoScript", func(t *testing.T) { rstest.NoScript(t, tg) })
	if got := calls(t, srv, "fcall"); got != 0 {
		t.Errorf("%d FCALLs attempted, want none once FUNCTION LOAD was refused", got)
	}
}

// scriptsFallback opens a store on srv as u, checks that it chose scripts
// for a reason containing why, and that decisions then run by EVALSHA.
func scriptsFallback(t *testing.T, srv *redistest.Server, u string, why string) {
	t.Helper()
	s := redisstore.New(newClient(t, u), rstest.Defaults()...)
	if got := s.ModeReason(); got != "" {
		t.Errorf("ModeReason before the mode is decided = %q", got)
	}
	m, err := s.Mode(context.Background())
	if err != nil || m != redisstore.ModeScripts {
		t.Fatalf("Mode = %q, %v; want %q", m, err, redisstore.ModeScripts)
	}
	if got := s.ModeReason(); !strings.Contains(got, why) {
		t.Errorf("ModeReason = %q; want it to contain %q", got, why)
	}
	evalshas := calls(t, srv, "evalsha")
	decideSome(t, s, 2)
	if got := calls(t, srv, "evalsha") - evalshas; got != 2*len(sluice.Algorithms) {
		t.Errorf("%d EVALSHAs for %d decisions", got, 2*len(sluice.Algorithms))
	}
	if got := calls(t, srv, "fcall"); got != 0 {
		t.Errorf("%d FCALLs, want none in scripts mode", got)
	}
}

// TestScriptsModeACL: a user whose ACL lacks +function gets NOPERM from
// FUNCTION LOAD, and scripts.
func TestScriptsModeACL(t *testing.T) {
	srv := redistest.Start(t)
	if _, err := srv.Do("ACL", "SETUSER", "nofn", "on", ">pw", "~*", "&*", "+@all", "-function"); err != nil {
		t.Fatal(err)
	}
	u := url.URL{Scheme: "redis", Host: srv.Addr(), User: url.UserPassword("nofn", "pw")}
	scriptsFallback(t, srv, u.String(), "NOPERM")
}

// TestScriptsModeRenamedFunction: a server where FUNCTION is renamed away
// answers "unknown command", and the store uses scripts.
func TestScriptsModeRenamedFunction(t *testing.T) {
	srv := redistest.Start(t, redistest.WithArgs("--rename-command", "FUNCTION", ""))
	if _, err := srv.Do("FUNCTION", "LIST"); err == nil {
		t.Fatal("FUNCTION LIST answered on a server with FUNCTION renamed away")
	}
	scriptsFallback(t, srv, srv.URL(), "unknown command")
}

// TestScriptsModeUnexpectedError: FUNCTION LOAD failing with an error no
// list foresees — here a function name already taken by another library —
// still decides the mode: scripts, rather than a FUNCTION LOAD again, and a
// failure, on every call.
func TestScriptsModeUnexpectedError(t *testing.T) {
	srv := redistest.Start(t)
	_, src := redisstore.Library()
	_, rest, ok := strings.Cut(src, "register_function('")
	if !ok {
		t.Fatal("no register_function in the library")
	}
	fn, _, _ := strings.Cut(rest, "'")
	squatter := "#!lua name=squatter\nredis.register_function('" + fn + "', function() return 1 end)"
	if _, err := srv.Do("FUNCTION", "LOAD", squatter); err != nil {
		t.Fatal(err)
	}
	scriptsFallback(t, srv, srv.URL(), "already exists")
}

// TestLoadResult: which FUNCTION LOAD errors decide scripts.
func TestLoadResult(t *testing.T) {
	for _, tc := range []struct {
		err     error
		refused bool
	}{
		{redisstore.ServerReply(errors.New("ERR Function x already exists")), true},
		{redisstore.ServerReply(errors.New("ERR unknown command 'FUNCTION'")), true},
		{errors.New("NOPERM this user has no permissions"), true},
		{redisstore.ServerReply(errors.New("LOADING Redis is loading the dataset in memory")), false},
		{redisstore.ServerReply(errors.New("BUSY Redis is busy running a script")), false},
		{errors.New("dial tcp 127.0.0.1:1: connect: connection refused"), false},
		{context.DeadlineExceeded, false},
	} {
		err := redisstore.LoadResult(map[string]error{"n1": tc.err})
		if err == nil || redisstore.FunctionsRefused(err) != tc.refused {
			t.Errorf("LoadResult(%v) = %v, refused %v; want refused %v", tc.err, err, redisstore.FunctionsRefused(err), tc.refused)
		}
	}
	if err := redisstore.LoadResult(map[string]error{"n1": nil, "n2": errors.New("i/o timeout")}); err != nil {
		t.Errorf("one node loaded: %v", err)
	}
}
