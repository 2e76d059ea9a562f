package rlqs

import (
	"math"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/fairshare"
)

// shareOf is member self's fair share of applied's limit among members, in
// requests per applied.Period: the weighted max-min allocation of the limit
// by each member's demand, with what the demands leave spread evenly, so
// that the shares sum to the limit. Every node computes it from the same
// sorted member list, so the shares of members on different nodes add up
// too. A demand above the limit counts as the limit: it is met no more.
func shareOf(members []Member, self string, applied *config.Policy) float64 {
	capacity := float64(applied.Limit)
	perPeriod := applied.Period.Seconds()
	claims := make([]fairshare.Claim, len(members))
	at := -1
	for i, m := range members {
		claims[i] = fairshare.Claim{Demand: min(capacity, m.Demand*perPeriod), Weight: 1}
		if m.ID == self {
			at = i
		}
	}
	if at < 0 {
		return 0
	}
	return fairshare.Allocate(capacity, claims, true)[at]
}

// units rounds a share down to whole requests (shares that sum to the limit
// then sum to at most the limit), forgiving the float error of a share that
// is a whole number.
func units(share float64) uint64 {
	return uint64(math.Floor(share + 1e-6))
}

// assignment is the QuotaAssignmentAction of share on applied, for ttl:
// requests_per_time_unit when the policy's period is a time unit and it
// has no burst of its own, else a token bucket refilled with the share
// every period, holding the share's part of the burst. A share under one
// request is DENY_ALL.
func assignment(applied *config.Policy, share float64, ttl time.Duration) *rlqsv3.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction {
	a := &rlqsv3.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction{AssignmentTimeToLive: durationpb.New(ttl)}
	n := units(share)
	unit, aligned := timeUnit(applied.Period)
	switch {
	case n == 0:
		a.RateLimitStrategy = blanket(typev3.RateLimitStrategy_DENY_ALL)
	case aligned && (applied.Burst == 0 || applied.Burst == applied.Limit):
		a.RateLimitStrategy = &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_RequestsPerTimeUnit_{
			RequestsPerTimeUnit: &typev3.RateLimitStrategy_RequestsPerTimeUnit{RequestsPerTimeUnit: n, TimeUnit: unit}}}
	default:
		burst := applied.Burst
		if burst == 0 {
			burst = applied.Limit
		}
		a.RateLimitStrategy = &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_TokenBucket{TokenBucket: &typev3.TokenBucket{
			MaxTokens:     clamp32(max(1, units(share*float64(burst)/float64(applied.Limit)))),
			TokensPerFill: wrapperspb.UInt32(clamp32(n)),
			FillInterval:  durationpb.New(applied.Period),
		}}}
	}
	return a
}

// blanket is the strategy that allows or denies every request.
func blanket(rule typev3.RateLimitStrategy_BlanketRule) *typev3.RateLimitStrategy {
	return &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_BlanketRule_{BlanketRule: rule}}
}

// blanketAssignment is an assignment of rule for ttl.
func blanketAssignment(rule typev3.RateLimitStrategy_BlanketRule, ttl time.Duration) *rlqsv3.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction {
	return &rlqsv3.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction{
		AssignmentTimeToLive: durationpb.New(ttl), RateLimitStrategy: blanket(rule)}
}

// timeUnit is Envoy's unit for a period of exactly one unit.
func timeUnit(p time.Duration) (typev3.RateLimitUnit, bool) {
	switch p {
	case time.Second:
		return typev3.RateLimitUnit_SECOND, true
	case time.Minute:
		return typev3.RateLimitUnit_MINUTE, true
	case time.Hour:
		return typev3.RateLimitUnit_HOUR, true
	case 24 * time.Hour:
		return typev3.RateLimitUnit_DAY, true
	}
	return typev3.RateLimitUnit_UNKNOWN, false
}

func clamp32(n uint64) uint32 { return uint32(min(n, math.MaxUint32)) }

// sameStrategy reports whether two assignments limit alike, so that the
// second only extends the first's time to live (as Envoy treats it).
func sameStrategy(a, b *rlqsv3.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction) bool {
	return a != nil && b != nil && proto.Equal(a.GetRateLimitStrategy(), b.GetRateLimitStrategy())
}

// rateOf is an assignment's allowance in requests per second, to compare
// the assignments of a bucket's several limits; DENY_ALL is 0, ALLOW_ALL
// infinite.
func rateOf(a *rlqsv3.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction) float64 {
	s := a.GetRateLimitStrategy()
	switch st := s.GetStrategy().(type) {
	case *typev3.RateLimitStrategy_RequestsPerTimeUnit_:
		return float64(st.RequestsPerTimeUnit.GetRequestsPerTimeUnit()) / unitSeconds(st.RequestsPerTimeUnit.GetTimeUnit())
	case *typev3.RateLimitStrategy_TokenBucket:
		return float64(st.TokenBucket.GetTokensPerFill().GetValue()) / st.TokenBucket.GetFillInterval().AsDuration().Seconds()
	case *typev3.RateLimitStrategy_BlanketRule_:
		if st.BlanketRule == typev3.RateLimitStrategy_DENY_ALL {
			return 0
		}
	}
	return math.Inf(1)
}

func unitSeconds(u typev3.RateLimitUnit) float64 {
	switch u {
	case typev3.RateLimitUnit_MINUTE:
		return 60
	case typev3.RateLimitUnit_HOUR:
		return 3600
	case typev3.RateLimitUnit_DAY:
		return 86400
	}
	return 1
}
