package envoyrls

import (
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

// WithDynamicMetadata makes every response carry, in its dynamic_metadata,
// the request it answers, as envoyproxy/ratelimit does with
// RESPONSE_DYNAMIC_METADATA=true: domain, descriptors (each a list of
// "key=value" entries, with its limit override and hits_addend when it has
// them) and the request's hitsAddend when not 0. Envoy stores it under the
// rate limit filter's name, for access logs and later filters. Off by
// default.
func WithDynamicMetadata(on bool) Option { return func(s *Server) { s.dynamicMetadata = on } }

// requestMetadata is the dynamic metadata describing req.
func requestMetadata(req *rlsv3.RateLimitRequest) *structpb.Struct {
	descs := make([]*structpb.Value, 0, len(req.GetDescriptors()))
	for _, d := range req.GetDescriptors() {
		entries := make([]*structpb.Value, 0, len(d.GetEntries()))
		for _, e := range d.GetEntries() {
			entries = append(entries, structpb.NewStringValue(e.GetKey()+"="+e.GetValue()))
		}
		f := map[string]*structpb.Value{"entries": structpb.NewListValue(&structpb.ListValue{Values: entries})}
		if l := d.GetLimit(); l != nil {
			// The override in protobuf's text form, as ratelimit writes it.
			f["limit"] = structpb.NewStringValue(l.String())
		}
		if h := d.GetHitsAddend(); h != nil {
			f["hitsAddend"] = structpb.NewNumberValue(float64(h.GetValue()))
		}
		descs = append(descs, structpb.NewStructValue(&structpb.Struct{Fields: f}))
	}
	fields := map[string]*structpb.Value{
		"domain":      structpb.NewStringValue(req.GetDomain()),
		"descriptors": structpb.NewListValue(&structpb.ListValue{Values: descs}),
	}
	if h := req.GetHitsAddend(); h != 0 {
		fields["hitsAddend"] = structpb.NewNumberValue(float64(h))
	}
	return &structpb.Struct{Fields: fields}
}
