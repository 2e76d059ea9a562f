// Package grpclimit is Sluice's gRPC server interceptors: the limits of
// package httplimit, for unary calls and stream creation.
//
// An Interceptor holds limits. Each Limit pairs a *sluice.Limiter with a Key
// that says which bucket a call is counted in: ByPeer, ByMetadata, ByMethod,
// ByFunc, Global, or several combined with Keys. Every call is checked against
// all the limits at once, all or nothing; a denied call consumes nothing and
// fails with codes.ResourceExhausted carrying a google.rpc.RetryInfo detail
// (the wait, rounded up to the millisecond, after which the call is admitted)
// and a google.rpc.QuotaFailure naming the limits that denied it. The
// ratelimit-policy, ratelimit and retry-after header metadata carry the same
// values as the HTTP fields of the same names.
//
//	in, err := grpclimit.New(
//		grpclimit.Limit(perClient, grpclimit.ByMetadata("x-api-key"), grpclimit.WithFallbackKey(grpclimit.ByPeer())),
//		grpclimit.Limit(global, grpclimit.Global()),
//	)
//	...
//	srv := grpc.NewServer(
//		grpc.ChainUnaryInterceptor(in.UnaryServerInterceptor()),
//		grpc.ChainStreamInterceptor(in.StreamServerInterceptor()),
//	)
//
// A stream is limited once, when it is created; its messages are not counted.
// A limit with the Concurrency algorithm holds one slot of its key while a
// unary handler runs, or while a stream is open, and gives it back when the
// handler returns or panics (a slot never given back returns after the
// policy's Period, its lease).
package grpclimit
