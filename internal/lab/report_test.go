package lab

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func keysOf(m map[string]any) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// TestJSONShape pins the --json output: the keys exactly as documented.
func TestJSONShape(t *testing.T) {
	rowKeys := []string{"admitted", "bound", "max_in_span", "nodes", "overshoot", "sent", "variant"}
	accKeys := append(slices.Clone(rowKeys), "decision_wrongly_allowed_pct", "decision_wrongly_denied_pct",
		"wrongly_allowed_pct", "wrongly_denied_pct")
	slices.Sort(accKeys)
	for _, c := range []struct {
		scenario string
		want     []string
	}{{Nodes, rowKeys}, {Accuracy, accKeys}} {
		var buf bytes.Buffer
		if err := run(t, c.scenario, Options{Sources: 50}).WriteJSON(&buf); err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
			t.Fatalf("%s: %v\n%s", c.scenario, err, buf.String())
		}
		if k := keysOf(got); !slices.Equal(k, []string{"rows", "scenario"}) || got["scenario"] != c.scenario {
			t.Fatalf("%s: top-level keys %v, scenario %v", c.scenario, k, got["scenario"])
		}
		rows := got["rows"].([]any)
		if len(rows) < 2 {
			t.Fatalf("%s: %d rows", c.scenario, len(rows))
		}
		for _, row := range rows {
			if k := keysOf(row.(map[string]any)); !slices.Equal(k, c.want) {
				t.Errorf("%s: row keys %v, want %v", c.scenario, k, c.want)
			}
		}
	}
}

func TestWriteTable(t *testing.T) {
	var buf bytes.Buffer
	r := run(t, StaleCache, Options{})
	if err := r.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"variant", "max_in_span", "overshoot", "naive: cached counter, sync 800ms", r.Summary} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

// TestPlot writes a PNG and an SVG of a sweep, a bar chart and the figures
// of two panels.
func TestPlot(t *testing.T) {
	dir := t.TempDir()
	for _, s := range []string{StaleCache, Boundary, Accuracy, Hybrid} {
		r := run(t, s, Options{Sources: 50})
		for _, ext := range []string{"png", "svg"} {
			file := filepath.Join(dir, s+"."+ext)
			if err := r.Plot(file); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			magic := map[string]string{"png": "\x89PNG", "svg": "<?xml"}[ext]
			if len(b) < 1000 || !bytes.HasPrefix(b, []byte(magic)) {
				t.Errorf("%s: %d bytes starting %q", file, len(b), b[:min(len(b), 8)])
			}
		}
	}
	if err := run(t, Nodes, Options{}).Plot(filepath.Join(dir, "x.pdf")); err == nil {
		t.Error("Plot(.pdf): no error")
	}
}
