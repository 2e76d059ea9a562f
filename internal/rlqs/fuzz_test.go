package rlqs

import (
	"math"
	"testing"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

// FuzzReports decodes a message as the server does and checks, for every
// report in it, what the server makes of it: a usage read within the
// bounds or refused, a bucket id resolved without a panic, and an answer
// that Envoy's validation rules accept, never above the limit.
func FuzzReports(f *testing.F) {
	for _, m := range []*rlqsv3.RateLimitQuotaUsageReports{
		{Domain: "edge", BucketQuotaUsages: []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{
			{BucketId: &rlqsv3.BucketId{Bucket: map[string]string{"policy": "api", "key": "k"}}, TimeElapsed: durationpb.New(time.Second), NumRequestsAllowed: 10, NumRequestsDenied: 5},
			{BucketId: &rlqsv3.BucketId{Bucket: map[string]string{"tenant": "a", "path": "/upload"}}, NumRequestsAllowed: 1},
		}},
		{Domain: "edge", BucketQuotaUsages: []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{
			{BucketId: &rlqsv3.BucketId{Bucket: map[string]string{"policy": "slow", "key": "", "plan": "x"}}, TimeElapsed: &durationpb.Duration{Seconds: -1}, NumRequestsAllowed: math.MaxUint64},
			{BucketId: &rlqsv3.BucketId{Bucket: map[string]string{"tenant": "a", "path": "/banned"}}, TimeElapsed: &durationpb.Duration{Nanos: 2e9}},
			{BucketId: &rlqsv3.BucketId{}},
			{},
		}},
	} {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	cfg := loadConfig(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		var m rlqsv3.RateLimitQuotaUsageReports
		if proto.Unmarshal(data, &m) != nil {
			return
		}
		for _, u := range m.GetBucketQuotaUsages() {
			use := readUsage(u, DefaultMaxElapsed)
			if use.refused == "" {
				if math.IsNaN(use.demand) || math.IsInf(use.demand, 0) || use.demand < 0 || use.demand > 2*MaxCount/MinElapsed.Seconds() {
					t.Fatalf("demand %v from %v", use.demand, u)
				}
			}
			if use.interval != 0 && (use.interval < MinElapsed || use.interval > DefaultMaxElapsed) {
				t.Fatalf("interval %v from %v", use.interval, u.GetTimeElapsed())
			}
			id := u.GetBucketId().GetBucket()
			if checkBucketID(id) != "" {
				continue
			}
			tg := resolve(cfg, m.GetDomain(), id)
			for _, l := range tg.limits {
				share := shareOf([]Member{{ID: "a", Demand: use.demand}, {ID: "b", Demand: 1}}, "a", l.policy)
				if share < 0 || share > float64(l.policy.Limit)+1e-6 {
					t.Fatalf("share %v of %s's limit %d", share, l.policy.Name, l.policy.Limit)
				}
				a := assignment(l.policy, share, time.Second)
				if err := a.ValidateAll(); err != nil {
					t.Fatalf("an assignment Envoy would reject: %v", err)
				}
				if r := rateOf(a); r > float64(l.policy.Limit)/l.policy.Period.Seconds()*(1+1e-9) {
					t.Fatalf("assigned %v a second, over %s's limit", r, l.policy.Name)
				}
			}
		}
	})
}
