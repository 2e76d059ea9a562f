package lab

import (
	"image/color"
	"slices"
	"testing"

	"gonum.org/v1/plot"

	"github.com/sluicehq/sluice"
)

// figures draws every scenario on the memory store.
func figures(t *testing.T) map[string]*figure {
	t.Helper()
	out := map[string]*figure{}
	for _, s := range Scenarios {
		f, err := run(t, s, Options{Sources: 50}).figure()
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		out[s] = f
	}
	return out
}

// TestPlotPalette: a colour means one thing in every plot. The same series
// (Sluice, its leases, the naive designs, each algorithm) has the same
// colour in every scenario, no two series share a colour, every row drawn
// is named in its figure's legend, and the limit is always the same line.
func TestPlotPalette(t *testing.T) {
	colourOf := map[series]color.Color{}
	seriesOfColour := map[color.Color]series{}
	for scenario, f := range figures(t) {
		if len(f.legend) == 0 {
			t.Errorf("%s: no legend", scenario)
		}
		for _, e := range f.legend {
			if e.thumb == nil || e.label == "" {
				t.Errorf("%s: legend entry %q without a sample or a name", scenario, e.label)
			}
			if e.series == "" {
				continue
			}
			if want, ok := palette[e.series]; !ok || e.colour != want {
				t.Errorf("%s: %s drawn in %v, palette says %v", scenario, e.series, e.colour, want)
			}
			if c, ok := colourOf[e.series]; ok && c != e.colour {
				t.Errorf("%s: %s drawn in %v, elsewhere in %v", scenario, e.series, e.colour, c)
			}
			if s, ok := seriesOfColour[e.colour]; ok && s != e.series {
				t.Errorf("%s: %v stands for %s here and for %s elsewhere", scenario, e.colour, e.series, s)
			}
			colourOf[e.series], seriesOfColour[e.colour] = e.colour, e.series
		}
		for _, p := range f.panels {
			for _, b := range p.bars {
				if !slices.ContainsFunc(f.legend, func(e legendEntry) bool { return e.series != "" && e.colour == b.colour }) {
					t.Errorf("%s: a bar in %v is not in the legend", scenario, b.colour)
				}
			}
		}
	}
	// Every design and algorithm the scenarios draw was seen, and each kept
	// its colour: naive designs in nodes, stale-cache, race, skew and hybrid.
	for _, s := range []series{seriesSluice, seriesLeases, seriesNaive} {
		if _, ok := colourOf[s]; !ok {
			t.Errorf("no scenario drew %s", s)
		}
	}
	for _, alg := range sluice.Algorithms {
		if _, ok := colourOf[series(alg)]; !ok {
			t.Errorf("boundary drew no %s", alg)
		}
	}
}

// TestPlotReadable: every panel says what it measures, its bars stand free
// of the frame with their values printed, and a ratio axis has a labelled
// tick and the limit line at 1.
func TestPlotReadable(t *testing.T) {
	for scenario, f := range figures(t) {
		if f.title == "" || len(f.panels) == 0 {
			t.Fatalf("%s: title %q, %d panels", scenario, f.title, len(f.panels))
		}
		ratios := 0
		for _, p := range f.panels {
			if p.Title.Text == "" || p.Y.Label.Text == "" {
				t.Errorf("%s: panel %q: y axis %q", scenario, p.Title.Text, p.Y.Label.Text)
			}
			for _, b := range p.bars {
				if b.text == "" {
					t.Errorf("%s: %q: a bar of %v without its value", scenario, p.Title.Text, b.y)
				}
				if b.x0 <= p.X.Min || b.x1 >= p.X.Max {
					t.Errorf("%s: %q: bar [%v, %v] touches the frame [%v, %v]", scenario, p.Title.Text, b.x0, b.x1, p.X.Min, p.X.Max)
				}
			}
			if !p.ratio {
				continue
			}
			ratios++
			if p.Y.Min > 0 || p.Y.Max <= 1 {
				t.Errorf("%s: %q: y from %v to %v leaves out 1", scenario, p.Title.Text, p.Y.Min, p.Y.Max)
			}
			if ticks := p.Y.Tick.Marker.Ticks(p.Y.Min, p.Y.Max); !slices.Contains(ticks, plot.Tick{Value: 1, Label: "1"}) {
				t.Errorf("%s: %q: no tick labelled 1 in %v", scenario, p.Title.Text, ticks)
			}
		}
		if ratios == 0 {
			t.Errorf("%s: no panel shows admitted ÷ bound", scenario)
		}
		if !slices.ContainsFunc(f.legend, func(e legendEntry) bool { return e.label == limitLegend && e.colour == color.Color(limitColour) }) {
			t.Errorf("%s: the limit is not in the legend", scenario)
		}
	}
}
