package grpclimit

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/sluicehq/sluice/internal/limitcore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// WithChargeFromTrailer charges the limit, when the handler has returned,
// what it reports in trailer metadata key name — the tokens a language model
// used, say — to the key the call was counted under, with
// sluice.Limiter.Charge: usage that already happened, consumed even beyond
// the limit, so that a key that used more than was left owes the excess and
// is denied until time repays it (docs/semantics.md, "Charging usage").
// Check at arrival with a cost of 0 or an estimate (WithCost), and charge
// the real usage after.
//
// The handler sets the trailer as usual, with grpc.SetTrailer or, in a
// stream, ServerStream.SetTrailer; it reaches the client unchanged. Its value
// must be one non-negative decimal integer, digits only; any other value, or
// the key set twice, is logged through WithLogger's logger and charges
// nothing, as does a call without it. The charge is made even when the
// client has gone away, and also when the handler panics (with what it had
// set by then); a store failure is logged, as the call has ended. A stream is
// charged once, when it ends. A concurrency limit cannot take this option
// (New refuses it).
func WithChargeFromTrailer(name string) LimitOption {
	key := strings.ToLower(name)
	return func(l *limit) {
		l.Usage = func(c *call) (int64, error) {
			n, _, err := limitcore.ParseUsageValues("trailer", key, c.trailerValues(key))
			return n, err
		}
	}
}

// WithChargeFunc charges the limit, when the handler has returned, the usage
// f computes from the call's context, its full method name, the response a
// unary handler returned (nil for a stream) and the handler's error (both nil
// when it panicked), as WithChargeFromTrailer charges a trailer's. f returns 0
// to charge nothing; a negative usage is logged and charges nothing.
func WithChargeFunc(f func(ctx context.Context, fullMethod string, resp any, err error) int64) LimitOption {
	return func(l *limit) {
		l.Usage = func(c *call) (int64, error) {
			n := f(c.ctx, c.method, c.resp, c.err)
			if n < 0 {
				return 0, fmt.Errorf("WithChargeFunc returned %d; want a non-negative usage", n)
			}
			return n, nil
		}
	}
}

// outcome is what a handled call left for the limits charged from it.
type outcome struct {
	mu      sync.Mutex
	trailer metadata.MD
	resp    any
	err     error
}

func (o *outcome) addTrailer(md metadata.MD) {
	o.mu.Lock()
	o.trailer = metadata.Join(o.trailer, md)
	o.mu.Unlock()
}

func (o *outcome) trailerValues(key string) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.trailer.Get(key)
}

// trailerStream records the trailer a unary handler (or a stream's, through
// its context) sets with grpc.SetTrailer, and passes it on.
type trailerStream struct {
	grpc.ServerTransportStream
	out *outcome
}

func (s trailerStream) SetTrailer(md metadata.MD) error {
	s.out.addTrailer(md)
	return s.ServerTransportStream.SetTrailer(md)
}

// watchTrailer returns ctx with its transport stream wrapped to record the
// trailer set through it; ctx itself outside a gRPC server.
func (o *outcome) watchTrailer(ctx context.Context) context.Context {
	ts := grpc.ServerTransportStreamFromContext(ctx)
	if ts == nil {
		return ctx
	}
	return grpc.NewContextWithServerTransportStream(ctx, trailerStream{ServerTransportStream: ts, out: o})
}

// chargedStream is a stream whose trailer is recorded, whether its handler
// sets it with SetTrailer or with grpc.SetTrailer on its Context.
type chargedStream struct {
	grpc.ServerStream
	ctx context.Context
	out *outcome
}

func (s chargedStream) Context() context.Context { return s.ctx }

func (s chargedStream) SetTrailer(md metadata.MD) {
	s.out.addTrailer(md)
	s.ServerStream.SetTrailer(md)
}
