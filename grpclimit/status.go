package grpclimit

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Response metadata keys: the HTTP fields of the same names, with the same
// values (see httplimit.FormatPolicy and httplimit.FormatRateLimit).
const (
	MetadataPolicy     = "ratelimit-policy"
	MetadataRateLimit  = "ratelimit"
	MetadataRetryAfter = "retry-after" // whole seconds, rounded up
)

// metadata returns the rate-limit metadata for quotas, with retry-after when
// retry > 0.
func (in *Interceptor) metadata(quotas []Quota, retry time.Duration) metadata.MD {
	md := metadata.MD{
		MetadataPolicy:    {in.core.PolicyField(quotas)},
		MetadataRateLimit: {httplimit.FormatRateLimit(quotas)},
	}
	if retry > 0 {
		md[MetadataRetryAfter] = []string{strconv.FormatInt(httplimit.Seconds(retry), 10)}
	}
	return md
}

// denial is the status of a denied call: ResourceExhausted with a RetryInfo
// (retry rounded up to the millisecond, so a client that obeys it is never
// early) and a QuotaFailure naming the violated limits, those without room
// for the cost.
func denial(violated []Quota, retry time.Duration) error {
	retry = (retry + time.Millisecond - 1).Truncate(time.Millisecond)
	qf := &errdetails.QuotaFailure{}
	var names []string
	for _, q := range violated {
		names = append(names, q.Policy.Name)
		qf.Violations = append(qf.Violations, &errdetails.QuotaFailure_Violation{
			Subject:     "policy:" + q.Policy.Name,
			Description: fmt.Sprintf("%d per %v", q.Policy.Limit, q.Policy.Period),
		})
	}
	st := status.New(codes.ResourceExhausted,
		fmt.Sprintf("rate limit exceeded (%s); retry in %v", strings.Join(names, ", "), retry))
	if d, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(retry)}, qf); err == nil {
		st = d
	}
	return st.Err()
}

// defaultError is the default WithErrorHandler.
func (in *Interceptor) defaultError(ctx context.Context, method string, err error) error {
	if errors.Is(err, sluice.ErrExceedsCapacity) {
		in.cfg.Logger.InfoContext(ctx, "grpclimit: call cost exceeds a limit's capacity", "method", method, "err", err)
		return status.Error(codes.ResourceExhausted, "the call costs more than a rate limit can ever admit at once")
	}
	in.cfg.Logger.ErrorContext(ctx, "grpclimit: cannot check rate limits", "method", method, "err", err)
	return status.Error(codes.Unavailable, "the rate limiter is unavailable")
}
