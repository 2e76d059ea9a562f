package httpapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memory"
)

// MinAdminTokenLen is the fewest characters CheckAdminToken accepts: 128
// bits written as hexadecimal digits.
const MinAdminTokenLen = 32

// minAdminTokenChars is the fewest different characters CheckAdminToken
// accepts. Random hexadecimal digits of MinAdminTokenLen have fewer with a
// probability below 1e-7.
const minAdminTokenChars = 8

// CheckAdminToken reports why token is too weak to guard the admin API, or
// nil. It cannot measure randomness; it refuses what is plainly guessable:
// fewer than MinAdminTokenLen characters, or fewer than 8 different ones.
func CheckAdminToken(token string) error {
	const how = "; generate one with: openssl rand -hex 32"
	if n := utf8.RuneCountInString(token); n < MinAdminTokenLen {
		return fmt.Errorf("the admin token is too short: %d of at least %d random characters%s", n, MinAdminTokenLen, how)
	}
	distinct := map[rune]bool{}
	for _, c := range token {
		distinct[c] = true
	}
	if len(distinct) < minAdminTokenChars {
		return fmt.Errorf("the admin token uses only %d different characters, which is not random%s", len(distinct), how)
	}
	return nil
}

// The admin API's answer to an address that keeps sending wrong or missing
// tokens: adminFailures admits AdminFailureBurst failures at once, then one
// per AdminFailurePeriod/AdminFailureBurst (GCRA); past that, the address's
// admin requests get 429 with Retry-After and their token is not even
// checked, so that guessing cannot go on at the network's speed.
const (
	AdminFailureBurst  = 10
	AdminFailurePeriod = time.Minute
	// adminLogLines bounds the log lines about refused admin requests: that
	// many at once, then one per adminLogPeriod/adminLogLines, each saying how
	// many refusals went unlogged since the last.
	adminLogLines  = 10
	adminLogPeriod = time.Minute
	// adminAddresses bounds the addresses whose failures are remembered.
	// When it is full a new address's first failure is refused with 429;
	// an address without failures is never refused.
	adminAddresses = 1 << 16
)

// adminGuard checks the admin bearer token and slows down the addresses
// that keep failing it, with Sluice's own limiter on a memory store.
type adminGuard struct {
	sum       [sha256.Size]byte // of the token: compared in constant time, whatever the lengths
	failures  *sluice.Limiter   // per address
	logLines  *sluice.Limiter   // one key
	unlogged  atomic.Int64      // refusals not logged since the last line
	failed    prometheus.Counter
	throttled prometheus.Counter
	log       *slog.Logger
}

func newAdminGuard(token string, reg prometheus.Registerer, log *slog.Logger, clock sluice.Clock) *adminGuard {
	opts := []memory.Option{memory.WithMaxKeys(adminAddresses)}
	if clock != nil {
		opts = append(opts, memory.WithClock(clock))
	}
	store := memory.New(opts...)
	limiter := func(name string, limit int64, period time.Duration) *sluice.Limiter {
		l, err := sluice.New(store, sluice.Policy{Name: name, Algorithm: sluice.GCRA, Limit: limit, Period: period})
		if err != nil {
			panic(err) // constant policies
		}
		return l
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &adminGuard{
		sum:      sha256.Sum256([]byte(token)),
		failures: limiter("sluice.admin_failures", AdminFailureBurst, AdminFailurePeriod),
		logLines: limiter("sluice.admin_log", adminLogLines, adminLogPeriod),
		failed: counter(reg, prometheus.CounterOpts{Name: "sluice_admin_auth_failures_total",
			Help: "Admin API requests refused with 401: the bearer token was wrong or missing."}),
		throttled: counter(reg, prometheus.CounterOpts{Name: "sluice_admin_auth_throttled_total",
			Help: "Admin API requests refused with 429, their token unchecked: their address sent too many wrong or missing tokens."}),
		log: log,
	}
}

// counter registers a counter on reg, or returns the one registered already
// (two handlers over one service share it).
func counter(reg prometheus.Registerer, opts prometheus.CounterOpts) prometheus.Counter {
	c := prometheus.NewCounter(opts)
	if err := reg.Register(c); err != nil {
		if are, ok := errors.AsType[prometheus.AlreadyRegisteredError](err); ok {
			return are.ExistingCollector.(prometheus.Counter)
		}
		panic(err)
	}
	return c
}

// admit reports whether r carries the token; otherwise it has answered 401,
// or 429 when r's address has failed too often.
func (g *adminGuard) admit(w http.ResponseWriter, r *http.Request) bool {
	ctx, addr := r.Context(), clientAddr(r.RemoteAddr)
	charged := false
	if peek, err := g.failures.AllowN(ctx, addr, 0); err == nil && peek.Remaining == 0 {
		res, err := g.failures.Allow(ctx, addr)
		if err == nil && !res.Allowed {
			g.throttle(ctx, w, r, addr, res.RetryAfter)
			return false
		}
		charged = true // a failure's worth freed meanwhile, and was taken
	}
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	bearer := ok && strings.EqualFold(scheme, "Bearer")
	if sum := sha256.Sum256([]byte(token)); bearer && subtle.ConstantTimeCompare(sum[:], g.sum[:]) == 1 {
		return true
	}
	g.failed.Inc()
	if !charged {
		if res, err := g.failures.Allow(ctx, addr); err == nil && !res.Allowed {
			g.throttle(ctx, w, r, addr, res.RetryAfter)
			return false
		}
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="sluice admin"`)
	if !bearer {
		g.note(ctx, r, addr, "no bearer token")
		writeError(w, http.StatusUnauthorized, &apiError{Code: "unauthorized", Message: "the admin API needs the bearer token: Authorization: Bearer TOKEN"})
		return false
	}
	g.note(ctx, r, addr, "wrong bearer token")
	writeError(w, http.StatusUnauthorized, &apiError{Code: "unauthorized", Message: "the bearer token is wrong"})
	return false
}

// throttle answers 429: addr failed too often, and may try again after wait.
func (g *adminGuard) throttle(ctx context.Context, w http.ResponseWriter, r *http.Request, addr string, wait time.Duration) {
	g.throttled.Inc()
	g.note(ctx, r, addr, "too many failures from this address")
	secs := max(1, int64((wait+time.Second-1)/time.Second))
	w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	writeError(w, http.StatusTooManyRequests, &apiError{Code: "too_many_failures",
		Message: fmt.Sprintf("too many admin requests with a wrong or missing token from your address; retry after %d s", secs)})
}

// note logs a refused admin request, within the log lines' limit.
func (g *adminGuard) note(ctx context.Context, r *http.Request, addr, why string) {
	if res, err := g.logLines.Allow(ctx, "lines"); err != nil || !res.Allowed {
		g.unlogged.Add(1)
		return
	}
	g.log.WarnContext(ctx, "admin API request refused", "reason", why, "client", addr,
		"method", r.Method, "path", r.URL.Path, "unlogged_since_last", g.unlogged.Swap(0))
}

// clientAddr is the IP of a request's peer (its RemoteAddr when that is not
// an address): failures are counted per address, whatever the port.
func clientAddr(remote string) string {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		return remote
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return ip.Unmap().String()
	}
	return host
}
