package config

import (
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestIntegerAsYAMLReadsIt: integer's shortcut for plain decimals reads every
// scalar as yaml.v3's Decode does, and refuses what Decode refuses.
func TestIntegerAsYAMLReadsIt(t *testing.T) {
	for _, text := range []string{"0", "7", "100", "9223372036854775807", "9223372036854775808",
		"-3", "+4", "007", "0x1F", "0o17", "1_000", "1e3", "1.5", `"12"`, "!!int 12", "!!str 12", "12 # c"} {
		var doc yaml.Node
		if err := yaml.Unmarshal([]byte("v: "+text), &doc); err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		n := doc.Content[0].Content[1]
		var want int64
		wantOK := n.ShortTag() == "!!int" && n.Decode(&want) == nil
		p := &fileParser{file: "t", out: &problems{}}
		got, ok := p.integer(&fields{set: []field{{name: "v", key: doc.Content[0].Content[0], val: n}}}, "v")
		if ok != wantOK || got != want {
			t.Errorf("%s: integer gives %d, %v; yaml.v3 %d, %v", text, got, ok, want, wantOK)
		}
	}
}
