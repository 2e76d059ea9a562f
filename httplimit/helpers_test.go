package httplimit_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/dunglas/httpsfv"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/testlog"
	"github.com/sluicehq/sluice/memory"
	"github.com/sluicehq/sluice/storetest"
)

// fakeStore returns a memory store on a clock that moves only when told to,
// starting at storetest.Epoch (the start of every window the tests use).
func fakeStore() (*memory.Store, *storetest.Clock) {
	clock := storetest.NewClock(storetest.Epoch)
	return memory.New(memory.WithClock(clock)), clock
}

func newLimiter(t testing.TB, store sluice.Store, p sluice.Policy) *sluice.Limiter {
	t.Helper()
	l, err := sluice.New(store, p)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// serve starts a real HTTP server on loopback with the middleware in front of
// a handler that answers 200 "ok".
func serve(t testing.TB, opts ...httplimit.Option) *httptest.Server {
	t.Helper()
	return serveHandler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}), opts...)
}

func serveHandler(t testing.TB, h http.Handler, opts ...httplimit.Option) *httptest.Server {
	t.Helper()
	mw, err := httplimit.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mw.Handler(h))
	t.Cleanup(srv.Close)
	return srv
}

type response struct {
	*http.Response
	body []byte
}

// get sends a GET with the given header fields (name, value, name, value...).
func get(t testing.TB, url string, header ...string) response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{res, body}
}

// field is one parsed member of RateLimit-Policy or RateLimit.
type field struct {
	name   string
	params map[string]int64
}

func (f field) String() string { return fmt.Sprintf("%q%v", f.name, f.params) }

// parseList parses a RateLimit-Policy or RateLimit field as a Structured
// Field List of sf-strings with integer parameters, failing on anything else.
func parseList(t testing.TB, values []string) []field {
	t.Helper()
	list, err := httpsfv.UnmarshalList(values)
	if err != nil {
		t.Fatalf("parse %q: %v", values, err)
	}
	var out []field
	for _, m := range list {
		item, ok := m.(httpsfv.Item)
		if !ok {
			t.Fatalf("%q: member %v is not an item", values, m)
		}
		name, ok := item.Value.(string)
		if !ok {
			t.Fatalf("%q: member %v is not a string", values, item.Value)
		}
		f := field{name: name, params: map[string]int64{}}
		for _, k := range item.Params.Names() {
			v, _ := item.Params.Get(k)
			n, ok := v.(int64)
			if !ok {
				t.Fatalf("%q: parameter %s=%v is not an integer", values, k, v)
			}
			f.params[k] = n
		}
		out = append(out, f)
	}
	return out
}

// wantFields checks a parsed field against members given as name and
// parameter pairs, e.g. {"per-user", "q", 5, "w", 10}.
func wantFields(t testing.TB, what string, got []field, want ...[]any) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %v, want %d members", what, got, len(want))
	}
	for i, w := range want {
		f := got[i]
		if f.name != w[0].(string) || len(f.params) != (len(w)-1)/2 {
			t.Fatalf("%s member %d: %v, want %v", what, i, f, w)
		}
		for j := 1; j+1 < len(w); j += 2 {
			if v, ok := f.params[w[j].(string)]; !ok || v != int64(w[j+1].(int)) {
				t.Fatalf("%s member %d: %v, want %v", what, i, f, w)
			}
		}
	}
}

// retryAfter returns Retry-After as an integer, failing unless it is one.
func retryAfter(t testing.TB, r response) int64 {
	t.Helper()
	v := r.Header.Values("Retry-After")
	if len(v) != 1 {
		t.Fatalf("Retry-After: %q, want one value", v)
	}
	n, err := strconv.ParseInt(v[0], 10, 64)
	if err != nil || n < 0 || strconv.FormatInt(n, 10) != v[0] {
		t.Fatalf("Retry-After %q is not delay-seconds", v[0])
	}
	return n
}

// peek returns how many units key has left under l, consuming nothing.
func peek(t testing.TB, l *sluice.Limiter, key string) int64 {
	t.Helper()
	res, err := l.AllowN(context.Background(), key, 0)
	if err != nil {
		t.Fatal(err)
	}
	return res.Remaining
}

// syncBuffer is a log the server's goroutines and the test share.
type syncBuffer = testlog.Buffer

// failingStore is a sluice.Store whose every decision fails, as a store does
// when Redis is unreachable.
type failingStore struct{ err error }

func (s failingStore) Decide(context.Context, sluice.Request) (sluice.Result, error) {
	return sluice.Result{}, s.err
}

func (s failingStore) DecideAll(context.Context, []sluice.Request, []sluice.Result) error {
	return s.err
}

func slogTo(w io.Writer) *slog.Logger { return testlog.Logger(w) }
