package lab

import (
	"cmp"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Plot draws the report into file, as PNG or SVG by its extension: a title
// saying what the scenario did, panels whose titles say what they measure,
// values printed over the bars and one legend below. Where the y axis is a
// ratio to the bound, a dashed line at 1 marks the limit. A colour means the
// same in every scenario's plot (palette).
func (r *Report) Plot(file string) error {
	ext := strings.ToLower(filepath.Ext(file))
	if ext != ".png" && ext != ".svg" {
		return fmt.Errorf("lab: plot %q: want a .png or .svg file", file)
	}
	fig, err := r.figure()
	if err != nil {
		return fmt.Errorf("lab: plot: %w", err)
	}
	w, h := fig.size()
	var c vg.CanvasWriterTo
	if ext == ".png" {
		c = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(144))}
	} else {
		c = vgsvg.New(w, h)
	}
	fig.draw(draw.New(c))
	f, err := os.Create(file)
	if err != nil {
		return fmt.Errorf("lab: plot: %w", err)
	}
	if _, err := c.WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("lab: plot: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("lab: plot: %w", err)
	}
	return nil
}

// A figure is what Plot draws: a title, panels side by side, and one legend
// below them all.
type figure struct {
	title  string
	panels []*panel
	legend []legendEntry
}

// A panel is one plot and its width.
type panel struct {
	*plot.Plot
	width vg.Length
	// ratio: the y axis is admitted ÷ bound, with the limit line at 1.
	ratio bool
	bars  []*bar
}

// A legendEntry says what a colour or a line means. series is empty for
// reference lines (the limit, a proven bound).
type legendEntry struct {
	series series
	label  string
	colour color.Color
	thumb  plot.Thumbnailer
}

const (
	fontTitle  = 14
	fontPanel  = 12
	fontAxis   = 11
	fontTick   = 10
	fontValue  = 10
	fontLegend = 11
)

func sans(size vg.Length) text.Style {
	return text.Style{
		Font:    font.From(font.Font{Typeface: "Liberation", Variant: "Sans"}, size),
		Handler: plot.DefaultTextHandler,
	}
}

// newPanel returns a panel titled with what it measures, its axes labelled.
func (f *figure) newPanel(title, x, y string, width vg.Length) *panel {
	p := plot.New()
	p.Title.Text, p.X.Label.Text, p.Y.Label.Text = title, x, y
	p.Title.TextStyle = sans(fontPanel)
	p.Title.TextStyle.XAlign, p.Title.TextStyle.YAlign = text.XCenter, text.YTop
	p.Title.Padding = vg.Points(8)
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		st := a.Label.TextStyle
		a.Label.TextStyle = sans(fontAxis)
		a.Label.TextStyle.XAlign, a.Label.TextStyle.YAlign, a.Label.TextStyle.Rotation = st.XAlign, st.YAlign, st.Rotation
		st = a.Tick.Label
		a.Tick.Label = sans(fontTick)
		a.Tick.Label.XAlign, a.Tick.Label.YAlign = st.XAlign, st.YAlign
	}
	p.Y.Min = 0
	pn := &panel{Plot: p, width: width}
	f.panels = append(f.panels, pn)
	return pn
}

// addLegend adds an entry, once per series (or per label for references).
func (f *figure) addLegend(s series, label string, colour color.Color, thumb plot.Thumbnailer) {
	for _, e := range f.legend {
		if (s != "" && e.series == s) || (s == "" && e.label == label) {
			return
		}
	}
	f.legend = append(f.legend, legendEntry{series: s, label: label, colour: colour, thumb: thumb})
}

// A bar is one bar, placed in data units so that grouped bars, the values
// over them and the marks across them line up.
type bar struct {
	x0, x1, y float64
	colour    color.Color
	text      string // printed over it
}

func (b *bar) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	x0, x1, y0, y1 := trX(b.x0), trX(b.x1), trY(0), trY(b.y)
	c.FillPolygon(b.colour, c.ClipPolygonXY([]vg.Point{{X: x0, Y: y0}, {X: x0, Y: y1}, {X: x1, Y: y1}, {X: x1, Y: y0}}))
}

func (b *bar) DataRange() (xmin, xmax, ymin, ymax float64) { return b.x0, b.x1, 0, b.y }

func (b *bar) Thumbnail(c *draw.Canvas) {
	c.FillPolygon(b.colour, []vg.Point{c.Min, {X: c.Min.X, Y: c.Max.Y}, c.Max, {X: c.Max.X, Y: c.Min.Y}})
}

// A barSpec is one bar to draw: its series, the legend's name for it, its
// height and the text printed over it (or over textAt, if higher: over a
// mark across the bar).
type barSpec struct {
	series series
	legend string
	value  float64
	text   string
	textAt float64
}

// addBars draws the bars of the category at x side by side, each width
// wide and with its text over it, and names their series in the legend.
func (f *figure) addBars(p *panel, x, width float64, bs []barSpec) ([]*bar, error) {
	var out []*bar
	left := x - width*float64(len(bs))/2
	for i, s := range bs {
		x0 := left + float64(i)*width
		b := &bar{x0: x0 + width*0.06, x1: x0 + width*0.94, y: s.value, colour: palette[s.series], text: s.text}
		p.Add(b)
		p.bars = append(p.bars, b)
		if err := addText(p, (b.x0+b.x1)/2, max(s.value, s.textAt), s.text); err != nil {
			return nil, err
		}
		f.addLegend(s.series, s.legend, b.colour, b)
		out = append(out, b)
	}
	return out, nil
}

// addText prints text centred just above the point (x, y).
func addText(p *panel, x, y float64, s string) error {
	return addTextAt(p, x, y, s, text.XCenter, text.YBottom, vg.Point{Y: vg.Points(3)})
}

// addTextAt prints text at the point (x, y), aligned and moved by offset.
func addTextAt(p *panel, x, y float64, s string, xa text.XAlignment, ya text.YAlignment, offset vg.Point) error {
	l, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{{X: x, Y: y}}, Labels: []string{s}})
	if err != nil {
		return err
	}
	l.TextStyle[0] = sans(fontValue)
	l.TextStyle[0].XAlign, l.TextStyle[0].YAlign = xa, ya
	l.Offset = offset
	p.Add(l)
	return nil
}

// categories labels the x axis with one name per category at 0, 1, … and
// leaves half a category free at each end, so no bar touches the frame.
func categories(p *panel, names ...string) {
	p.NominalX(names...)
	p.Y.Padding = 0 // NominalX pads for the first name; the free half category is room enough
	p.X.Min, p.X.Max = -0.6, float64(len(names))-0.4
}

// ratioAxis makes the y axis of p admitted ÷ bound: from 0 to above the
// highest value, a tick labelled at 1 and a dashed line across at 1, the
// limit, named in the legend.
func (f *figure) ratioAxis(p *panel, highest float64) {
	p.ratio = true
	p.Y.Min, p.Y.Max = 0, math.Max(highest*1.12, 1.2)
	p.Y.Tick.Marker = ratioTicks{}
	limit := plotter.NewFunction(func(float64) float64 { return 1 })
	limit.Color, limit.Width = limitColour, vg.Points(1.5)
	limit.Dashes = []vg.Length{vg.Points(6), vg.Points(4)}
	p.Add(limit)
	f.addLegend("", limitLegend, limit.Color, limit)
}

// limitLegend names the line at 1 in the legend.
const limitLegend = "limit: admitted = bound (1)"

// ratioTicks are the default ticks with 1, the limit, always labelled.
type ratioTicks struct{}

func (ratioTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	ticks = slices.DeleteFunc(ticks, func(t plot.Tick) bool { return t.Value == 1 })
	for i, t := range ticks {
		switch {
		case t.Label != "" && math.Abs(t.Value-1) < (hi-lo)/12:
			ticks[i].Label = "" // too close to the 1 it would crowd
		case strings.Contains(t.Label, "."): // 0, 0.5 rather than 0.0, 0.5 beside 1
			ticks[i].Label = strings.TrimSuffix(strings.TrimRight(t.Label, "0"), ".")
		}
	}
	ticks = append(ticks, plot.Tick{Value: 1, Label: "1"})
	slices.SortFunc(ticks, func(a, b plot.Tick) int { return cmp.Compare(a.Value, b.Value) })
	return ticks
}

// barsWidth is the width of a panel of n categories of bars.
func barsWidth(n int) vg.Length {
	return max(6*vg.Inch, (2.4+1.2*vg.Length(n))*vg.Inch)
}

// Layout, in points.
const (
	figurePanelHeight = 4.4 * 72
	figurePad         = 10
	legendThumb       = 24
	legendGap         = 6
	legendSpacing     = 22
)

func (f *figure) size() (w, h vg.Length) {
	for _, p := range f.panels {
		w += p.width
	}
	w = max(w, sans(fontTitle).Width(f.title)+4*figurePad)
	_, legend := f.legendRows(w - 2*figurePad)
	h = vg.Length(figurePanelHeight) + sans(fontTitle).Height(f.title) + legend + 4*figurePad
	return w, h
}

// legendRows lays the legend out left to right in rows of at most width:
// the row of each entry, and the height of them all.
func (f *figure) legendRows(width vg.Length) (rows []int, height vg.Length) {
	st := sans(fontLegend)
	var x vg.Length
	row := 0
	for _, e := range f.legend {
		w := legendThumb + legendGap + st.Width(e.label)
		if x > 0 && x+w > width {
			row, x = row+1, 0
		}
		rows = append(rows, row)
		x += w + legendSpacing
	}
	return rows, vg.Length(row+1) * (st.Height("Mg") + vg.Points(6))
}

func (f *figure) draw(c draw.Canvas) {
	c.SetColor(color.White)
	c.Fill(c.Rectangle.Path())
	c = draw.Crop(c, figurePad, -figurePad, figurePad, -figurePad)

	title := sans(fontTitle)
	title.XAlign, title.YAlign = text.XCenter, text.YTop
	c.FillText(title, vg.Point{X: c.Center().X, Y: c.Max.Y}, f.title)
	c.Max.Y -= title.Height(f.title) + figurePad

	c.Min.Y += f.drawLegend(c) + figurePad

	var total vg.Length
	for _, p := range f.panels {
		total += p.width
	}
	x := c.Min.X
	for _, p := range f.panels {
		sub := c
		sub.Min.X, sub.Max.X = x, x+(c.Max.X-c.Min.X)*p.width/total
		x = sub.Max.X
		p.Draw(draw.Crop(sub, 0, -figurePad, 0, 0))
	}
}

// drawLegend draws the legend at the bottom of c, each row centred, and
// returns its height.
func (f *figure) drawLegend(c draw.Canvas) vg.Length {
	width := c.Max.X - c.Min.X
	rows, height := f.legendRows(width)
	st := sans(fontLegend)
	st.YAlign = text.YCenter
	lineH := height / vg.Length(rows[len(rows)-1]+1)
	rowWidth := map[int]vg.Length{}
	for i, e := range f.legend {
		rowWidth[rows[i]] += legendThumb + legendGap + st.Width(e.label) + legendSpacing
	}
	x, row := vg.Length(0), -1
	for i, e := range f.legend {
		if rows[i] != row {
			row = rows[i]
			x = c.Min.X + (width-rowWidth[row]+legendSpacing)/2
		}
		y := c.Min.Y + height - vg.Length(row+1)*lineH
		thumb := draw.Canvas{Canvas: c.Canvas, Rectangle: vg.Rectangle{
			Min: vg.Point{X: x, Y: y + lineH*0.2}, Max: vg.Point{X: x + legendThumb, Y: y + lineH*0.8}}}
		e.thumb.Thumbnail(&thumb)
		x += legendThumb + legendGap
		c.FillText(st, vg.Point{X: x, Y: y + lineH/2}, e.label)
		x += st.Width(e.label) + legendSpacing
	}
	return height
}
