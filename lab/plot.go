package lab

import (
	"fmt"
	"image/color"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Plot draws the report into file, as PNG or SVG by its extension: for
// stale-cache the naive overshoot against the sync interval S, with the
// atomic store's as a line; for the others one bar per variant. A dashed line
// marks overshoot 1, the limit.
func (r *Report) Plot(file string) error {
	ext := strings.ToLower(filepath.Ext(file))
	if ext != ".png" && ext != ".svg" {
		return fmt.Errorf("lab: plot %q: want a .png or .svg file", file)
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("sluice lab %s (%s)", r.Scenario, r.Store)
	p.Y.Label.Text = "overshoot (max admitted in a span / bound)"
	p.Y.Min = 0
	var err error
	if r.Scenario == StaleCache {
		err = r.plotSweep(p)
	} else {
		err = r.plotBars(p)
	}
	if err != nil {
		return fmt.Errorf("lab: plot: %w", err)
	}
	for _, row := range r.Rows {
		p.Y.Max = max(p.Y.Max, row.Overshoot*1.1, 1.2)
	}
	limit := plotter.NewFunction(func(float64) float64 { return 1 })
	limit.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	limit.Color = color.Gray{Y: 100}
	p.Add(limit)
	p.Legend.Add("limit (overshoot 1)", limit)
	p.Legend.Top = true
	p.Legend.Left = true
	if err := p.Save(8*vg.Inch, 5*vg.Inch, file); err != nil {
		return fmt.Errorf("lab: plot: %w", err)
	}
	return nil
}

// plotSweep draws stale-cache: overshoot against S.
func (r *Report) plotSweep(p *plot.Plot) error {
	p.X.Label.Text = "sync interval S (ms)"
	var naive plotter.XYs
	atomic := -1.0
	for _, row := range r.Rows {
		if row.Naive {
			naive = append(naive, plotter.XY{X: float64(row.Sync.Milliseconds()), Y: row.Overshoot})
		} else {
			atomic = row.Overshoot
		}
	}
	line, points, err := plotter.NewLinePoints(naive)
	if err != nil {
		return err
	}
	line.Color, points.Color = color.RGBA{R: 200, A: 255}, color.RGBA{R: 200, A: 255}
	points.Shape = draw.CircleGlyph{}
	p.Add(line, points)
	p.Legend.Add("naive cached counter", line, points)
	if atomic >= 0 {
		a := plotter.NewFunction(func(float64) float64 { return atomic })
		a.Color = color.RGBA{B: 200, A: 255}
		a.Width = vg.Points(2)
		p.Add(a)
		p.Legend.Add("sluice atomic store", a)
	}
	p.X.Min = 0
	return nil
}

// plotBars draws one bar per variant, naive ones red and Sluice's blue.
func (r *Report) plotBars(p *plot.Plot) error {
	names := make([]string, len(r.Rows))
	for i, row := range r.Rows {
		names[i] = strings.Replace(row.Variant, ": ", ":\n", 1)
		if r.Scenario == Hybrid { // long names: one line per part
			names[i] = strings.ReplaceAll(names[i], ", ", "\n")
		}
		v := make(plotter.Values, len(r.Rows))
		v[i] = row.Overshoot
		bars, err := plotter.NewBarChart(v, vg.Points(40))
		if err != nil {
			return err
		}
		bars.Color = color.RGBA{B: 200, A: 255}
		if row.Naive || (r.Scenario == Boundary && row.Overshoot > 1) {
			bars.Color = color.RGBA{R: 200, A: 255}
		}
		bars.LineStyle.Width = 0
		p.Add(bars)
	}
	p.NominalX(names...)
	p.X.Label.Text = "variant"
	return nil
}
