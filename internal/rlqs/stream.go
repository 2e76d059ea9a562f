package rlqs

import (
	"errors"
	"io"
	"strconv"
	"sync"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// sendQueue is how many responses may wait for a stream's sender. Pushes to
// a stream whose queue is full are dropped: it gets its assignment again
// with its next report, and a stream that does not read holds up no other.
const sendQueue = 64

// stream is one Envoy's stream.
type stream struct {
	id     string // names it: its buckets' member ids on the Board start with it
	domain string
	send   chan *rlqsv3.RateLimitQuotaResponse
	subs   map[string]*sub // by bucketName; guarded by Server.mu
}

// StreamRateLimitQuotas implements RateLimitQuotaServiceServer: the first
// message names the domain and subscribes to its buckets; every report is
// answered with an assignment for each bucket it names, and assignments
// are pushed to the stream when another Envoy's demand moves its share.
func (s *Server) StreamRateLimitQuotas(gs grpc.BidiStreamingServer[rlqsv3.RateLimitQuotaUsageReports, rlqsv3.RateLimitQuotaResponse]) error {
	select {
	case <-s.closing:
		return errShutdown
	default:
	}
	if !s.admit() {
		s.metrics.refused.WithLabelValues(reasonTooManyStream).Inc()
		return status.Errorf(codes.ResourceExhausted, "rate limit quota service: %d streams open, the most this server takes", s.maxStreams)
	}
	st := &stream{id: s.node + "/" + strconv.FormatUint(s.seq.Add(1), 10), send: make(chan *rlqsv3.RateLimitQuotaResponse, sendQueue), subs: make(map[string]*sub)}
	ctx := gs.Context()
	done := make(chan struct{})
	var wg sync.WaitGroup
	sendErr := make(chan error, 1)
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			case m := <-st.send:
				if err := gs.Send(m); err != nil {
					sendErr <- err
					return
				}
			}
		}
	})
	msgs, recvErr := make(chan *rlqsv3.RateLimitQuotaUsageReports), make(chan error, 1)
	go func() { // ends when the handler returns: Recv then fails
		for {
			m, err := gs.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			select {
			case msgs <- m:
			case <-done:
				return
			}
		}
	}()
	defer func() {
		close(done)
		wg.Wait()
		s.closeStream(ctx, st)
	}()
	first := time.NewTimer(s.firstReport)
	defer first.Stop()
	for {
		select {
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case <-s.closing:
			return errShutdown
		case err := <-sendErr:
			return err
		case err := <-recvErr:
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		case <-first.C:
			if st.domain == "" {
				s.metrics.refused.WithLabelValues(reasonNoReport).Inc()
				return status.Errorf(codes.DeadlineExceeded, "rate limit quota service: no report within %v of opening the stream", s.firstReport)
			}
		case m := <-msgs:
			if st.domain == "" {
				if m.GetDomain() == "" {
					s.metrics.refused.WithLabelValues(reasonNoDomain).Inc()
					return status.Error(codes.InvalidArgument, "rate limit quota service: the stream's first message must name the domain")
				}
				// Later messages' domains are ignored: the stream stays in
				// its first domain, as the protocol says.
				st.domain = m.GetDomain()
				first.Stop()
			}
			if actions := s.report(ctx, st, m); len(actions) > 0 {
				select {
				case st.send <- &rlqsv3.RateLimitQuotaResponse{BucketAction: actions}:
				case <-ctx.Done():
					return status.FromContextError(ctx.Err()).Err()
				case err := <-sendErr:
					return err
				}
			}
		}
	}
}

// errShutdown ends the streams of a server shutting down.
var errShutdown = status.Error(codes.Unavailable, "rate limit quota service: the server is shutting down; reconnect")

// admit counts a new stream in, unless the cap is reached.
func (s *Server) admit() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.streams >= s.maxStreams {
		return false
	}
	s.streams++
	s.metrics.streams.Inc()
	return true
}

// push queues actions for st without waiting (see sendQueue).
func (s *Server) push(st *stream, actions []*rlqsv3.RateLimitQuotaResponse_BucketAction) {
	select {
	case st.send <- &rlqsv3.RateLimitQuotaResponse{BucketAction: actions}:
	default:
	}
}
