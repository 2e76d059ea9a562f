package envoyrls

import (
	"strconv"
	"strings"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
)

// Limit overrides.
//
// Envoy can send a limit with a descriptor ("limit": requests per unit, from
// the route's dynamic metadata). envoyproxy/ratelimit then applies that limit
// instead of whatever its configuration matches, as a fixed window aligned to
// the epoch; so does Sluice, unless WithLimitOverrides(false).
//
// Every override is decided under one policy name, overridePolicyName, so the
// metrics get one label for them all however many rates proxies send. Its key
// starts with the rate, then the domain and every entry's key and value, so
// two overrides share a counter only when they have the same rate on the same
// descriptor.

// overridePolicyName names the policy of every limit override. The "sluice."
// prefix is the service's own namespace (its readiness probe lives there too),
// so no configured policy shares the overrides' state.
const overridePolicyName = "sluice.envoy_override"

// overrideUnits are the override's units, with the lengths
// envoyproxy/ratelimit gives them (a month is 30 days, a year 365).
var overrideUnits = map[typev3.RateLimitUnit]time.Duration{
	typev3.RateLimitUnit_SECOND: time.Second,
	typev3.RateLimitUnit_MINUTE: time.Minute,
	typev3.RateLimitUnit_HOUR:   time.Hour,
	typev3.RateLimitUnit_DAY:    day,
	typev3.RateLimitUnit_MONTH:  30 * day,
	typev3.RateLimitUnit_YEAR:   365 * day,
}

const day = 24 * time.Hour

// maxOverridePeriod is the longest period a policy may have (2^52 µs, about
// 142 years; see sluice.Policy.Validate), checked before multiplying so the
// product cannot overflow.
const maxOverridePeriod = time.Duration(1<<52) * time.Microsecond

// addOverride records descriptor i's limit override as the limit it gets. It
// reports false for an override no policy can express (no unit, or a period
// too long): the caller refuses the descriptor, since an error would let it
// through an Envoy that fails open.
func (sc *scratch) addOverride(i int, domain string, d *ratelimitv3.RateLimitDescriptor, cost int64) bool {
	o := d.GetLimit()
	unit, ok := overrideUnits[o.GetUnit()]
	if !ok {
		return false
	}
	mult := uint64(1)
	if m := o.GetUnitMultiplier(); m != nil && m.GetValue() > 0 {
		mult = uint64(m.GetValue())
	}
	if mult > uint64(maxOverridePeriod/unit) {
		return false
	}
	p := &config.Policy{Policy: sluice.Policy{
		Name:      overridePolicyName,
		Algorithm: sluice.FixedWindow,
		Limit:     int64(o.GetRequestsPerUnit()),
		Period:    time.Duration(mult) * unit,
	}}
	ref := limitRef{policy: p, key: overrideKey(p, domain, d.GetEntries()), cost: cost, desc: int32(i)}
	if p.Limit == 0 {
		// envoyproxy/ratelimit denies everything under a limit of 0. No
		// policy can say that, so it is not decided: any cost is over it.
		ref.kind = kindZeroLimit
	} else if p.Validate() != nil {
		return false
	}
	sc.limits = append(sc.limits, ref)
	return true
}

// overrideKey is "LIMIT/PERIOD_µs|domain|key1|value1|...", each field after
// the rate escaped as in storeKey, and hashed as there when too long.
func overrideKey(p *config.Policy, domain string, entries []*ratelimitv3.RateLimitDescriptor_Entry) string {
	var num [48]byte
	rate := strconv.AppendInt(num[:0], p.Limit, 10)
	rate = append(rate, '/')
	rate = strconv.AppendInt(rate, p.Period.Microseconds(), 10)
	n := len(rate) + 1 + escapedLen(domain)
	for _, e := range entries {
		n += 2 + escapedLen(e.GetKey()) + escapedLen(e.GetValue())
	}
	var b strings.Builder
	b.Grow(n)
	b.Write(rate)
	b.WriteByte('|')
	writeEscaped(&b, domain)
	for _, e := range entries {
		b.WriteByte('|')
		writeEscaped(&b, e.GetKey())
		b.WriteByte('|')
		writeEscaped(&b, e.GetValue())
	}
	return hashIfLong(b.String())
}
