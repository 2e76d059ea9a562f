package envoyrls

import (
	"strconv"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/sluicehq/sluice/httplimit"
)

// headers returns the RateLimit-Policy and RateLimit fields for the limits the
// statuses report, and Retry-After when the request is denied.
//
// Only enforced limits are advertised: a shadow limit is not applied, and a
// client that slowed down for it would do so for nothing. A limit reported on
// several descriptors (one check) is listed once.
func (sc *scratch) headers(allowed bool, retry time.Duration) []*corev3.HeaderValue {
	sc.quotas = sc.quotas[:0]
	for k, bi := range sc.best {
		if bi < 0 {
			continue
		}
		l := &sc.limits[bi]
		if l.kind != kindLive || l.policy.Shadow || sc.listed(k, l.check) {
			continue
		}
		sc.quotas = append(sc.quotas, httplimit.Quota{Policy: &sc.checks[l.check].Applied().Policy, Result: sc.results[l.check]})
	}
	n := 0
	if len(sc.quotas) > 0 {
		n += 2
	}
	if !allowed && retry > 0 {
		n++
	}
	if n == 0 {
		return nil
	}
	values := make([]corev3.HeaderValue, n)
	out := make([]*corev3.HeaderValue, n)
	for i := range values {
		out[i] = &values[i]
	}
	i := 0
	if len(sc.quotas) > 0 {
		values[0].Key, values[0].Value = httplimit.HeaderPolicy, httplimit.FormatPolicy(sc.quotas)
		values[1].Key, values[1].Value = httplimit.HeaderRateLimit, httplimit.FormatRateLimit(sc.quotas)
		i = 2
	}
	if i < n {
		values[i].Key, values[i].Value = httplimit.HeaderRetryAfter, strconv.FormatInt(httplimit.Seconds(retry), 10)
	}
	return out
}

// listed reports whether check c is reported by one of the first k
// descriptors, and so already among sc.quotas.
func (sc *scratch) listed(k int, c int32) bool {
	for _, bi := range sc.best[:k] {
		if bi >= 0 && sc.limits[bi].kind == kindLive && sc.limits[bi].check == c {
			return true
		}
	}
	return false
}
