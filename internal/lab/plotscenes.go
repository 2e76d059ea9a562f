package lab

import (
	"fmt"
	"image/color"
	"math"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/sluicehq/sluice"
)

// figure builds the picture of the report: for each scenario the result
// docs/lab.md describes.
func (r *Report) figure() (*figure, error) {
	if len(r.Rows) == 0 {
		return nil, fmt.Errorf("%s: no rows to draw", r.Scenario)
	}
	switch r.Scenario {
	case StaleCache:
		return r.staleCacheFigure()
	case Accuracy:
		return r.accuracyFigure()
	case Hybrid:
		return r.hybridFigure()
	case Fairness:
		return r.fairnessFigure()
	case Usage:
		return r.usageFigure()
	default:
		return r.overshootFigure()
	}
}

// storeName names the store for a title: the memory store or Redis.
func (r *Report) storeName() string {
	if r.Store == "" || strings.HasPrefix(r.Store, "memory:") {
		return "memory store"
	}
	return "Redis store"
}

// limit is L: the bound of the scenario's fixed-window or sliding-log rows.
func (r *Report) limit() int64 {
	l := r.Rows[0].Bound
	for _, row := range r.Rows {
		if row.Algorithm == sluice.FixedWindow || row.Algorithm == sluice.SlidingLog {
			l = row.Bound
		}
	}
	return l
}

// overshootTexts are the words of the one-panel bar figures: what the
// scenario does (formatted with the nodes, L and the store), what the panel
// measures, its y axis.
var overshootTexts = map[string][3]string{
	Boundary: {"boundary: a burst of L just before a window edge and another just after it\n%d nodes, L = %d, %s",
		"most admitted in any span of one period ÷ the algorithm's bound (L; B + L for the buckets)", "admitted ÷ bound"},
	Nodes: {"nodes: %d nodes limiting one key, each receiving 2L per period\nL = %d, %s",
		"most admitted in one window ÷ L", "admitted ÷ L"},
	Race: {"race: %d nodes sending L requests each to one key at the same instant\nL = %d, %s",
		"most admitted in one round ÷ L", "admitted ÷ L"},
	Skew: {"skew: %d nodes whose clocks disagree, bursts just before window edges\nL = %d, %s",
		"most admitted in one window of true time ÷ L", "admitted ÷ L"},
}

// overshootFigure draws one bar per variant: the most admitted in a span
// over its bound, with both numbers printed over the bar.
func (r *Report) overshootFigure() (*figure, error) {
	words, ok := overshootTexts[r.Scenario]
	if !ok {
		return nil, fmt.Errorf("no plot for scenario %q", r.Scenario)
	}
	f := &figure{title: fmt.Sprintf(words[0], r.Rows[0].Nodes, r.limit(), r.storeName())}
	x := "design"
	if comparesAlgorithms(r.Scenario) {
		x = "algorithm"
	}
	if err := f.overshootBars(f.newPanel(words[1], x, words[2], barsWidth(len(r.Rows))), r); err != nil {
		return nil, err
	}
	return f, nil
}

// overshootBars draws into p one bar per row of r: the most admitted in a
// span over its bound, with both numbers printed over the bar.
func (f *figure) overshootBars(p *panel, r *Report) error {
	names := make([]string, len(r.Rows))
	highest := 0.0
	for i, row := range r.Rows {
		names[i] = strings.Replace(row.Variant, ": ", ":\n", 1)
		highest = max(highest, row.Overshoot)
		text := fmt.Sprintf("%.3f\n%d of %d", row.Overshoot, row.MaxInSpan, row.Bound)
		if _, err := f.addBars(p, float64(i), 0.6, []barSpec{{series: seriesOf(r.Scenario, row), legend: row.Variant, value: row.Overshoot, text: text}}); err != nil {
			return err
		}
	}
	categories(p, names...)
	f.ratioAxis(p, highest)
	return nil
}

// staleCacheFigure draws the naive overshoot against the sync interval S,
// the atomic store's across, and N, where the naive counter heads as S nears
// the period (every node admitting L on its own).
func (r *Report) staleCacheFigure() (*figure, error) {
	nodes := r.Rows[0].Nodes
	f := &figure{title: fmt.Sprintf("stale-cache: %d nodes deciding on a cached count they sync every S\nL = %d, %s",
		nodes, r.limit(), r.storeName())}
	p := f.newPanel("most admitted in one window ÷ L, against the sync interval S", "sync interval S (ms)", "admitted ÷ L", 9*vg.Inch)
	var naive plotter.XYs
	var texts []string
	var ticks []plot.Tick
	atomic, highest, widest := -1.0, float64(nodes), 0.0
	for _, row := range r.Rows {
		if !row.Naive {
			atomic = row.Overshoot
			continue
		}
		ms := float64(row.Sync.Microseconds()) / 1000
		naive = append(naive, plotter.XY{X: ms, Y: row.Overshoot})
		texts = append(texts, fmt.Sprintf("%.3f", row.Overshoot))
		ticks = append(ticks, plot.Tick{Value: ms, Label: fmt.Sprint(ms)})
		highest, widest = max(highest, row.Overshoot), max(widest, ms)
	}
	if len(naive) == 0 {
		return nil, fmt.Errorf("stale-cache: no naive rows")
	}
	p.X.Min, p.X.Max = -widest*0.05, widest*1.05
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	// N is a reference, drawn first so that the measured lines go over it.
	all := plotter.NewFunction(func(float64) float64 { return float64(nodes) })
	all.Color, all.Width, all.Dashes = color.Gray{Y: 110}, vg.Points(1.2), []vg.Length{vg.Points(2), vg.Points(3)}
	p.Add(all)
	if atomic >= 0 {
		a := plotter.NewFunction(func(float64) float64 { return atomic })
		a.Color, a.Width = palette[seriesSluice], vg.Points(4)
		p.Add(a)
		f.addLegend(seriesSluice, fmt.Sprintf("sluice: atomic store (%.3f at every S: nothing to sync)", atomic), a.Color, a)
	}
	line, points, err := plotter.NewLinePoints(naive)
	if err != nil {
		return nil, err
	}
	line.Color, line.Width = palette[seriesNaive], vg.Points(2)
	points.Color, points.Shape, points.Radius = palette[seriesNaive], draw.CircleGlyph{}, vg.Points(3.5)
	p.Add(line, points)
	for i, xy := range naive {
		// Above and left of each point: the rising line leaves that free.
		if err := addTextAt(p, xy.X, xy.Y, texts[i], text.XRight, text.YBottom, vg.Point{X: vg.Points(-5), Y: vg.Points(4)}); err != nil {
			return nil, err
		}
	}
	f.addLegend(seriesNaive, "naive: cached counter synced every S", line.Color, multiThumb{line, points})
	f.ratioAxis(p, highest)
	f.addLegend("", fmt.Sprintf("%d: each of the %d nodes admitting L on its own", nodes, nodes), all.Color, all)
	return f, nil
}

// multiThumb draws several thumbnails over each other, as a line with its
// points.
type multiThumb []plot.Thumbnailer

func (m multiThumb) Thumbnail(c *draw.Canvas) {
	for _, t := range m {
		t.Thumbnail(c)
	}
}

// accuracyFigure draws the sliding window's error rates by both measures
// beside the log's (none), and the worst span of each, the approximation's
// cost.
func (r *Report) accuracyFigure() (*figure, error) {
	f := &figure{title: fmt.Sprintf("accuracy: sliding_window against the exact sliding_log, a bursty trace of %d requests from many sources\nL = %d, %s",
		r.Rows[0].Sent, r.limit(), r.storeName())}
	errs := f.newPanel("requests decided wrongly (Cloudflare reports 0.003% for its traffic)", "", "% of requests sent", 7*vg.Inch)
	measures := []struct {
		name string
		of   func(Row) *float64
	}{
		{"wrongly allowed\n(Cloudflare's\nmeasure)", func(r Row) *float64 { return r.WronglyAllowedPct }},
		{"wrongly denied\n(Cloudflare's\nmeasure)", func(r Row) *float64 { return r.WronglyDeniedPct }},
		{"wrongly allowed\n(decision by\ndecision)", func(r Row) *float64 { return r.DecisionWronglyAllowedPct }},
		{"wrongly denied\n(decision by\ndecision)", func(r Row) *float64 { return r.DecisionWronglyDeniedPct }},
	}
	names := make([]string, len(measures))
	highest := 0.0
	for i, m := range measures {
		names[i] = m.name
		var bs []barSpec
		for _, row := range r.Rows {
			v := m.of(row)
			if v == nil {
				return nil, fmt.Errorf("accuracy: row %s has no error rates", row.Variant)
			}
			highest = max(highest, *v)
			bs = append(bs, barSpec{series: seriesOf(r.Scenario, row), legend: accuracyLegend(row), value: *v, text: fmt.Sprintf("%.3g%%", *v)})
		}
		if _, err := f.addBars(errs, float64(i), 0.7/float64(len(r.Rows)), bs); err != nil {
			return nil, err
		}
	}
	categories(errs, names...)
	errs.Y.Max = math.Max(highest*1.15, 0.01)

	worst := f.newPanel("most admitted in any span of one period ÷ L", "", "admitted ÷ L (worst source)", 4*vg.Inch)
	highest = 0
	names = names[:0]
	for i, row := range r.Rows {
		names = append(names, string(row.Algorithm))
		highest = max(highest, row.Overshoot)
		text := fmt.Sprintf("%.3f\n%d of %d", row.Overshoot, row.MaxInSpan, row.Bound)
		if _, err := f.addBars(worst, float64(i), 0.6, []barSpec{{series: seriesOf(r.Scenario, row), legend: accuracyLegend(row), value: row.Overshoot, text: text}}); err != nil {
			return nil, err
		}
	}
	categories(worst, names...)
	f.ratioAxis(worst, highest)
	return f, nil
}

func accuracyLegend(row Row) string {
	switch row.Algorithm {
	case sluice.SlidingLog:
		return "sliding_log: the exact count"
	case sluice.SlidingWindow:
		return "sliding_window: the weighted estimate"
	}
	return string(row.Algorithm)
}

// hybridFigure draws, per algorithm, each variant's overshoot with the
// leases' proven bound over theirs, and what each costs in calls to the
// shared store.
func (r *Report) hybridFigure() (*figure, error) {
	f := &figure{title: fmt.Sprintf("hybrid: %d nodes sharing one key under demand of 2L per period\nL = %d, %s",
		r.Rows[0].Nodes, r.limit(), r.storeName())}
	over := f.newPanel("most admitted in one span ÷ the algorithm's bound", "algorithm", "admitted ÷ bound", 5.5*vg.Inch)
	calls := f.newPanel("calls to the shared store per request", "algorithm", "store calls per request", 5.5*vg.Inch)
	var algs []sluice.Algorithm
	groups := map[sluice.Algorithm][]Row{}
	widest, highest := 0, 0.0
	for _, row := range r.Rows {
		if groups[row.Algorithm] == nil {
			algs = append(algs, row.Algorithm)
		}
		groups[row.Algorithm] = append(groups[row.Algorithm], row)
		widest = max(widest, len(groups[row.Algorithm]))
		highest = max(highest, row.Overshoot)
		if row.ProvenBound != nil {
			highest = max(highest, *row.ProvenBound)
		}
	}
	width := 0.8 / float64(widest)
	var marks []func()
	names := make([]string, len(algs))
	for i, alg := range algs {
		names[i] = string(alg)
		var os, cs []barSpec
		for _, row := range groups[alg] {
			s, name := seriesOf(r.Scenario, row), hybridLegend(row)
			if row.StoreCallsPerDecision == nil {
				return nil, fmt.Errorf("hybrid: row %s has no store calls", row.Variant)
			}
			o := barSpec{series: s, legend: name, value: row.Overshoot, text: fmt.Sprintf("%.3f", row.Overshoot)}
			if row.ProvenBound != nil {
				o.textAt = *row.ProvenBound
			}
			os = append(os, o)
			cs = append(cs, barSpec{series: s, legend: name, value: *row.StoreCallsPerDecision, text: fmt.Sprintf("%.4f", *row.StoreCallsPerDecision)})
		}
		bars, err := f.addBars(over, float64(i), width, os)
		if err != nil {
			return nil, err
		}
		if _, err := f.addBars(calls, float64(i), width, cs); err != nil {
			return nil, err
		}
		for j, row := range groups[alg] {
			if row.ProvenBound != nil {
				marks = append(marks, func() { f.provenBound(over, bars[j], *row.ProvenBound) })
			}
		}
	}
	categories(over, names...)
	categories(calls, names...)
	f.ratioAxis(over, highest)
	for _, mark := range marks {
		mark() // over the limit line, which a bound of 1 would hide under
	}
	calls.Y.Max = 1.15
	return f, nil
}

// provenBound marks the bound a lease row is proven never to exceed across
// its bar.
func (f *figure) provenBound(p *panel, b *bar, bound float64) {
	f.boundMark(p, b, bound, "", "proven bound of the leases", palette[seriesLeases])
}

// boundMark marks a bound across bar b, dotted, named in the legend by s
// (or by label, for a reference line without a series).
func (f *figure) boundMark(p *panel, b *bar, bound float64, s series, label string, colour color.Color) {
	pad := (b.x1 - b.x0) * 0.15
	l, err := plotter.NewLine(plotter.XYs{{X: b.x0 - pad, Y: bound}, {X: b.x1 + pad, Y: bound}})
	if err != nil {
		return // two finite points always make a line
	}
	l.Color, l.Width, l.Dashes = colour, vg.Points(2.5), []vg.Length{vg.Points(3), vg.Points(2)}
	p.Add(l)
	f.addLegend(s, label, l.Color, l)
}

func hybridLegend(row Row) string {
	switch {
	case row.Naive:
		return fmt.Sprintf("naive: local counters synced every %v", row.Sync)
	case row.ProvenBound != nil:
		return "sluice: leases"
	}
	return "sluice: exact, every decision on the store"
}
