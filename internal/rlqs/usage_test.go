package rlqs

import (
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/protobuf/types/known/durationpb"
)

// usageOver is a report of 10 requests over d (none: d is 0).
func usageOver(d time.Duration) *rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage {
	u := &rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{NumRequestsAllowed: 10}
	if d > 0 {
		u.TimeElapsed = durationpb.New(d)
	}
	return u
}
