package rlqs

import (
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
)

// Bounds on what one usage report may say. A report beyond them is refused:
// its counts are ignored (the bucket keeps the demand it had, 0 when new),
// and its bucket is still answered, so a bad report neither moves the shares
// nor escapes the limit.
const (
	// MinElapsed is the shortest time a report is taken to cover. Envoy
	// reports a bucket's first request at once, over an elapsed time near
	// zero (or none at all): its demand is read over MinElapsed instead,
	// so one request is not an infinite rate. Envoy's report interval is at
	// least this.
	MinElapsed = 100 * time.Millisecond
	// DefaultMaxElapsed is the longest time_elapsed accepted.
	DefaultMaxElapsed = time.Hour
	// MaxCount bounds num_requests_allowed and num_requests_denied each:
	// above it, a report is not a count of requests (2^40, a trillion).
	MaxCount = 1 << 40
	// MaxEntries bounds the entries of one bucket id and MaxIDBytes their
	// bytes; a larger bucket id is refused (DENY_ALL), as an Envoy rate
	// limit descriptor too large to decide is OVER_LIMIT.
	MaxEntries = 16
	MaxIDBytes = 4096
)

// Reasons for refusing input, the values of sluice_rlqs_refused_total's
// reason label.
const (
	reasonBucketID      = "bucket_id"      // missing, empty or too large
	reasonDuration      = "duration"       // time_elapsed negative, invalid or over the bound
	reasonCount         = "count"          // a count over MaxCount
	reasonUnknownPolicy = "unknown_policy" // a native bucket id naming no policy
	reasonTooManyBucket = "too_many_buckets"
	reasonTooManyStream = "too_many_streams"
	reasonNoDomain      = "domain"    // a first message without a domain
	reasonNoReport      = "no_report" // a stream that sent nothing in time
)

// usage is one bucket's report, read.
type usage struct {
	// interval is the time the report covers (time_elapsed), the
	// stream's report interval, which times the assignment's TTL; 0 when
	// under MinElapsed (a subscription's first report): unknown yet.
	interval time.Duration
	// demand is requests (allowed and denied) per second over interval.
	demand float64
	// refused, when set, is why the counts were ignored.
	refused string
}

// checkBucketID says why a bucket id cannot be tracked, or "".
func checkBucketID(id map[string]string) string {
	if len(id) == 0 || len(id) > MaxEntries {
		return reasonBucketID
	}
	n := 0
	for k, v := range id {
		n += len(k) + len(v)
	}
	if n > MaxIDBytes {
		return reasonBucketID
	}
	return ""
}

// readUsage reads u's demand, refusing counts or durations beyond the
// bounds (maxElapsed: the longest time_elapsed accepted).
func readUsage(u *rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage, maxElapsed time.Duration) usage {
	var out usage
	if d := u.GetTimeElapsed(); d != nil {
		if d.CheckValid() != nil || d.AsDuration() < 0 || d.AsDuration() > maxElapsed {
			out.refused = reasonDuration
			return out
		}
		if d.AsDuration() >= MinElapsed {
			out.interval = d.AsDuration()
		}
	}
	allowed, denied := u.GetNumRequestsAllowed(), u.GetNumRequestsDenied()
	if allowed > MaxCount || denied > MaxCount {
		out.refused = reasonCount
		return out
	}
	out.demand = float64(allowed+denied) / max(MinElapsed, out.interval).Seconds()
	return out
}
