package grpclimit_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/grpclimit"
	"github.com/sluicehq/sluice/internal/testwait"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// TestInflightStreams: a concurrency limit holds a slot for as long as a
// stream is open and gives it back when the stream ends (here, its client
// cancels it); a unary call gives its slot back when it returns.
func TestInflightStreams(t *testing.T) {
	store, _ := fakeStore()
	lim := newLimiter(t, store, sluice.Policy{Name: "open", Algorithm: sluice.Concurrency, Limit: 1, Period: time.Hour})
	c := start(t, grpclimit.Limit(lim, grpclimit.ByMethod()))
	free := func(method string) int64 {
		r, err := lim.Held(context.Background(), method)
		if err != nil {
			t.Fatal(err)
		}
		return r.Remaining
	}
	// watch opens a Watch stream and reads its first message: admitted (the
	// cancel ends it) or the error.
	watch := func() (context.CancelFunc, error) {
		ctx, cancel := context.WithCancel(context.Background())
		s, err := c.Watch(ctx, &healthpb.HealthCheckRequest{})
		if err == nil {
			_, err = s.Recv()
		}
		if err != nil {
			cancel()
		}
		return cancel, err
	}
	cancel, err := watch()
	if err != nil {
		t.Fatalf("first stream: %v", err)
	}
	if _, err := watch(); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("second stream while the first is open: %v, want ResourceExhausted", err)
	}
	cancel()
	testwait.Until(t, "the stream's slot free", func() bool { return free(watchMethod) == 1 })
	cancel, err = watch()
	if err != nil {
		t.Fatalf("stream after the first ended: %v", err)
	}
	cancel()

	for i := range 3 {
		if o := check(t, c); o.err != nil {
			t.Fatalf("unary call %d: %v", i, o.err)
		}
	}
	if got := free(checkMethod); got != 1 {
		t.Fatalf("%d slots free after the unary calls returned, want 1", got)
	}
}
