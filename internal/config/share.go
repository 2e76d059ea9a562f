package config

import (
	"time"

	"github.com/sluicehq/sluice"
)

// ShareFair is the one value of a policy's share field: its limit is one
// limit shared among its keys by weighted max-min fairness.
const ShareFair = "fair"

// DefaultShareInterval is how often a fair-share policy's shares are
// recomputed from its keys' demand when share_interval is not set.
const DefaultShareInterval = 500 * time.Millisecond

// The bounds of share_interval: shorter would read the demand board more
// often than it changes; longer would let shares lag demand for minutes.
const (
	minShareInterval = 10 * time.Millisecond
	maxShareInterval = time.Minute
)

// share reads a native policy's share and share_interval into pol, and
// reports whether they are valid.
func (p *fileParser) share(f *fields, pol *Policy) bool {
	ok := true
	if n := f.get("share"); n != nil {
		v, set := p.str(f, "share")
		switch {
		case !set:
			ok = false
		case v != ShareFair:
			p.errorf(n, join(f.path, "share"), "must be %q (the limit is shared fairly among the policy's keys), got %q", ShareFair, v)
			ok = false
		case pol.Algorithm == sluice.Concurrency:
			p.errorf(n, join(f.path, "share"), "a concurrency policy limits requests in flight, not a rate to share; remove share")
			ok = false
		default:
			pol.FairShare = true
			pol.ShareInterval = DefaultShareInterval
		}
	}
	if n := f.get("share_interval"); n != nil {
		d, set := p.duration(f, "share_interval")
		switch {
		case !set:
			ok = false
		case !f.has("share"):
			p.errorf(n, join(f.path, "share_interval"), "applies only with share: fair")
			ok = false
		case d < minShareInterval || d > maxShareInterval:
			p.errorf(n, join(f.path, "share_interval"), "must be between %v and %v, got %v", minShareInterval, maxShareInterval, d)
			ok = false
		default:
			pol.ShareInterval = d
		}
	}
	return ok
}
