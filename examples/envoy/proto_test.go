// Package envoy holds the tests of the Envoy configurations Sluice ships:
// examples/envoy/envoy.yaml, and the Istio and Envoy Gateway snippets of
// docs/gateways.md. No Envoy runs here: each configuration is decoded into
// go-control-plane's types, as Envoy would decode it, and checked by their
// validation rules, every typed_config included; then the descriptors its
// rate_limits actions make are matched against the rate limit configuration
// they are meant for.
package envoy

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"

	// The typed_config types the configurations use, registered for
	// protojson and anypb.
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
)

// repoFile is the path of a file of the repository, from this directory.
func repoFile(path string) string { return filepath.Join("..", "..", filepath.FromSlash(path)) }

// readFile reads a file of the repository.
func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(repoFile(path))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// yamlDocs decodes every document of a YAML stream into generic values.
func yamlDocs(t *testing.T, name string, text []byte) []map[string]any {
	t.Helper()
	dec := yaml.NewDecoder(strings.NewReader(string(text)))
	var docs []map[string]any
	for {
		var doc map[string]any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if doc != nil {
			docs = append(docs, doc)
		}
	}
}

// decodeInto decodes a generic value (from YAML) into m as Envoy reads its
// configuration: through its JSON form, unknown fields refused, each Any
// resolved by its @type. Then m and every message inside it, typed_config
// included, must pass go-control-plane's validation.
func decodeInto(t *testing.T, what string, v any, m proto.Message) {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if err := protojson.Unmarshal(raw, m); err != nil {
		t.Fatalf("%s: decoding as %s: %v", what, m.ProtoReflect().Descriptor().FullName(), err)
	}
	if err := validateDeep(m); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// validateDeep runs m's ValidateAll, then that of every message inside it,
// unpacking each Any: ValidateAll alone stops at an Any, so a typed_config
// would go unchecked.
func validateDeep(m proto.Message) error {
	if v, ok := m.(interface{ ValidateAll() error }); ok {
		if err := v.ValidateAll(); err != nil {
			return fmt.Errorf("%s: %w", m.ProtoReflect().Descriptor().FullName(), err)
		}
	}
	if a, ok := m.(*anypb.Any); ok {
		inner, err := a.UnmarshalNew()
		if err != nil {
			return fmt.Errorf("typed_config %s: %w", a.GetTypeUrl(), err)
		}
		return validateDeep(inner)
	}
	var err error
	m.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() && fd.Message() != nil:
			for i := 0; i < v.List().Len() && err == nil; i++ {
				err = validateDeep(v.List().Get(i).Message().Interface())
			}
		case fd.IsMap() && fd.MapValue().Message() != nil:
			v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
				err = validateDeep(mv.Message().Interface())
				return err == nil
			})
		case fd.Message() != nil && !fd.IsList() && !fd.IsMap():
			err = validateDeep(v.Message().Interface())
		}
		return err == nil
	})
	return err
}

// typedConfig unpacks a filter's typed_config into m.
func typedConfig(t *testing.T, what string, a *anypb.Any, m proto.Message) {
	t.Helper()
	if err := a.UnmarshalTo(m); err != nil {
		t.Fatalf("%s: typed_config %s is not a %s: %v", what, a.GetTypeUrl(), m.ProtoReflect().Descriptor().FullName(), err)
	}
}

// httpFilter returns the filter of hcm named name.
func httpFilter(t *testing.T, hcm *hcmv3.HttpConnectionManager, name string) *hcmv3.HttpFilter {
	t.Helper()
	for _, f := range hcm.GetHttpFilters() {
		if f.GetName() == name {
			return f
		}
	}
	t.Fatalf("no %s among the HTTP filters", name)
	return nil
}

// field walks a generic value by keys (and list indexes as ints).
func field(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			l, _ := v.([]any)
			if k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}
