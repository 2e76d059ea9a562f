package envoyrls

import (
	"context"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Decoding requests.
//
// proto3 strings must be UTF-8, and the generated code refuses a message
// whose strings are not: gRPC would answer INTERNAL before Sluice sees the
// request, and an Envoy with the default failure_mode_deny: false lets such a
// request through uncounted. A header value Envoy copies into a descriptor is
// bytes, not text, so a client controls whether it is UTF-8.
//
// So the service is registered with its own method handler, which takes the
// request's bytes undecoded (as the unknown fields of an Empty, which nothing
// validates) and decodes them itself: with the generated code when it can,
// else leniently, keeping each string's bytes as they are. A store key is
// bytes, so a value that is not UTF-8 gets a counter of its own like any
// other. Only bytes that are not a protobuf message at all are an error.

// serviceDesc is rlsv3's service description with shouldRateLimitHandler.
var serviceDesc = grpc.ServiceDesc{
	ServiceName: ServiceName,
	HandlerType: (*rlsv3.RateLimitServiceServer)(nil),
	Methods:     []grpc.MethodDesc{{MethodName: "ShouldRateLimit", Handler: shouldRateLimitHandler}},
	Streams:     []grpc.StreamDesc{},
	Metadata:    rlsv3.RateLimitService_ServiceDesc.Metadata,
}

func shouldRateLimitHandler(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	var raw emptypb.Empty
	if err := dec(&raw); err != nil {
		return nil, err // not protobuf at all: gRPC's own INTERNAL
	}
	req, err := decodeRequest(raw.ProtoReflect().GetUnknown())
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "not a rate limit request: %v", err)
	}
	s := srv.(*Server)
	if interceptor == nil {
		return s.ShouldRateLimit(ctx, req)
	}
	info := &grpc.UnaryServerInfo{Server: srv, FullMethod: rlsv3.RateLimitService_ShouldRateLimit_FullMethodName}
	return interceptor(ctx, req, info, func(ctx context.Context, req any) (any, error) {
		return s.ShouldRateLimit(ctx, req.(*rlsv3.RateLimitRequest))
	})
}

// decodeRequest decodes a RateLimitRequest, whatever bytes its strings hold.
func decodeRequest(b []byte) (*rlsv3.RateLimitRequest, error) {
	req := &rlsv3.RateLimitRequest{}
	if proto.Unmarshal(b, req) == nil {
		return req, nil
	}
	return decodeLenient(b)
}

// decodeLenient decodes a RateLimitRequest keeping its strings' bytes as they
// are; unknown fields are dropped.
func decodeLenient(b []byte) (*rlsv3.RateLimitRequest, error) {
	req := &rlsv3.RateLimitRequest{}
	err := walk(b, 3, 1<<3, func(num protowire.Number, v []byte, x uint64) error {
		switch num {
		case 1:
			req.Domain = string(v)
		case 2:
			d, err := decodeDescriptor(v)
			req.Descriptors = append(req.Descriptors, d)
			return err
		case 3:
			req.HitsAddend = uint32(x)
		}
		return nil
	})
	return req, err
}

func decodeDescriptor(b []byte) (*ratelimitv3.RateLimitDescriptor, error) {
	d := &ratelimitv3.RateLimitDescriptor{}
	err := walk(b, 4, 1<<4, func(num protowire.Number, v []byte, x uint64) error {
		switch num {
		case 1:
			e := &ratelimitv3.RateLimitDescriptor_Entry{}
			d.Entries = append(d.Entries, e)
			return walk(v, 2, 0, func(num protowire.Number, v []byte, _ uint64) error {
				switch num {
				case 1:
					e.Key = string(v)
				case 2:
					e.Value = string(v)
				}
				return nil
			})
		case 2:
			// No strings inside: the generated code decodes it, merging a
			// repeated occurrence as protobuf does.
			if d.Limit == nil {
				d.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{}
			}
			return merge.Unmarshal(v, d.Limit)
		case 3:
			if d.HitsAddend == nil {
				d.HitsAddend = &wrapperspb.UInt64Value{}
			}
			return merge.Unmarshal(v, d.HitsAddend)
		case 4:
			d.IsNegativeHits = x != 0
		}
		return nil
	})
	return d, err
}

var merge = proto.UnmarshalOptions{Merge: true, DiscardUnknown: true}

// walk calls field for each field of the message b numbered 1 to known: v
// holds a length-delimited field's bytes, x a varint's value. Each of those
// fields takes one wire type: a varint when its bit is set in varints, else
// length-delimited (strings and messages). Other fields, and known ones with
// another wire type, are skipped as unknown, as the generated code does.
func walk(b []byte, known protowire.Number, varints uint64, field func(num protowire.Number, v []byte, x uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		want := protowire.BytesType
		if varints&(1<<num) != 0 {
			want = protowire.VarintType
		}
		if num > known || typ != want {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return protowire.ParseError(n)
			}
			b = b[n:]
			continue
		}
		var v []byte
		var x uint64
		if typ == protowire.VarintType {
			x, n = protowire.ConsumeVarint(b)
		} else {
			v, n = protowire.ConsumeBytes(b)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if err := field(num, v, x); err != nil {
			return err
		}
	}
	return nil
}
