package envoyrls

import (
	"math"
	"strconv"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// envoyproxy/ratelimit's response headers (LIMIT_RESPONSE_HEADERS_ENABLED).
//
// They describe one descriptor, the one envoyproxy/ratelimit picks (see
// headerStatus). Its requests_per_unit, limit_remaining and
// duration_until_reset (whole seconds) become three headers, whose names
// ratelimit reads from LIMIT_LIMIT_HEADER, LIMIT_REMAINING_HEADER and
// LIMIT_RESET_HEADER. They go beside the IETF fields of WithHeaders, and
// either can be on without the other.

// LimitHeaderNames names the three headers; an empty name leaves its header
// out.
type LimitHeaderNames struct {
	Limit, Remaining, Reset string
}

// DefaultLimitHeaderNames are envoyproxy/ratelimit's defaults.
var DefaultLimitHeaderNames = LimitHeaderNames{Limit: "RateLimit-Limit", Remaining: "RateLimit-Remaining", Reset: "RateLimit-Reset"}

// WithLimitHeaders makes every response carry envoyproxy/ratelimit's three
// headers, under names (its defaults: DefaultLimitHeaderNames). Off by
// default.
func WithLimitHeaders(names LimitHeaderNames) Option {
	return func(s *Server) { s.limitHeaders = names }
}

// LimitHeadersFromEnv reads envoyproxy/ratelimit's environment variables:
// whether the headers are on (LIMIT_RESPONSE_HEADERS_ENABLED, a Go boolean)
// and their names, each defaulting to DefaultLimitHeaderNames. getenv is
// os.Getenv in a program.
func LimitHeadersFromEnv(getenv func(string) string) (names LimitHeaderNames, on bool) {
	on, _ = strconv.ParseBool(getenv("LIMIT_RESPONSE_HEADERS_ENABLED"))
	names = DefaultLimitHeaderNames
	for _, v := range []struct {
		env string
		to  *string
	}{{"LIMIT_LIMIT_HEADER", &names.Limit}, {"LIMIT_REMAINING_HEADER", &names.Remaining}, {"LIMIT_RESET_HEADER", &names.Reset}} {
		if name := getenv(v.env); name != "" {
			*v.to = name
		}
	}
	return names, on
}

func (n LimitHeaderNames) on() bool { return n.Limit != "" || n.Remaining != "" || n.Reset != "" }

// headerStatus is the status the headers describe, as envoyproxy/ratelimit
// picks it: the last descriptor over an enforced (not quota-mode) limit, else
// the first of those with a limit that has the least remaining; nil when no
// status has a limit.
func (sc *scratch) headerStatus(resp *rlsv3.RateLimitResponse) *rlsv3.RateLimitResponse_DescriptorStatus {
	var pick *rlsv3.RateLimitResponse_DescriptorStatus
	least := uint32(math.MaxUint32)
	for i, st := range resp.Statuses {
		if st.CurrentLimit == nil {
			continue
		}
		if st.Code == codeOverLimit && !sc.reportsQuota(i) {
			pick, least = st, 0
			continue
		}
		if st.LimitRemaining < least {
			pick, least = st, st.LimitRemaining
		}
	}
	return pick
}

// reportsQuota reports whether descriptor i's status is that of a quota-mode
// limit.
func (sc *scratch) reportsQuota(i int) bool {
	if i >= len(sc.best) || sc.best[i] < 0 {
		return false
	}
	p := sc.limits[sc.best[i]].policy
	return p != nil && p.QuotaMode
}

// headers returns the headers describing st.
func (n LimitHeaderNames) headers(st *rlsv3.RateLimitResponse_DescriptorStatus) []*corev3.HeaderValue {
	out := make([]*corev3.HeaderValue, 0, 3)
	for _, h := range []struct{ name, value string }{
		{n.Limit, strconv.FormatUint(uint64(st.CurrentLimit.RequestsPerUnit), 10)},
		{n.Remaining, strconv.FormatUint(uint64(st.LimitRemaining), 10)},
		{n.Reset, strconv.FormatInt(st.DurationUntilReset.GetSeconds(), 10)},
	} {
		if h.name != "" {
			out = append(out, &corev3.HeaderValue{Key: h.name, Value: h.value})
		}
	}
	return out
}
