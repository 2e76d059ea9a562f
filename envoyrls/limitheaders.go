package envoyrls

import (
	"strconv"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// envoyproxy/ratelimit's response headers (LIMIT_RESPONSE_HEADERS_ENABLED).
//
// They describe one descriptor: the first of those with a limit that has the
// least remaining. Its requests_per_unit, limit_remaining and
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

// headers returns the headers for resp's statuses, or nil when no
// status has a limit.
func (n LimitHeaderNames) headers(resp *rlsv3.RateLimitResponse) []*corev3.HeaderValue {
	var least *rlsv3.RateLimitResponse_DescriptorStatus
	for _, st := range resp.Statuses {
		if st.CurrentLimit != nil && (least == nil || st.LimitRemaining < least.LimitRemaining) {
			least = st
		}
	}
	if least == nil {
		return nil
	}
	out := make([]*corev3.HeaderValue, 0, 3)
	for _, h := range []struct{ name, value string }{
		{n.Limit, strconv.FormatUint(uint64(least.CurrentLimit.RequestsPerUnit), 10)},
		{n.Remaining, strconv.FormatUint(uint64(least.LimitRemaining), 10)},
		{n.Reset, strconv.FormatInt(least.DurationUntilReset.GetSeconds(), 10)},
	} {
		if h.name != "" {
			out = append(out, &corev3.HeaderValue{Key: h.name, Value: h.value})
		}
	}
	return out
}
