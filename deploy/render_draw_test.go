package deploy

import (
	"fmt"
	"image/color"
	"math"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// axisUnits says how the picture shows each Grafana unit the dashboard
// uses: the factor its values are multiplied by and the unit on the axis.
// Grafana shows decision times of a few ms in ms, and ratios in percent.
var axisUnits = map[string]struct {
	scale float64
	label string
}{
	"reqps":       {1, "req/s"},
	"ops":         {1, "ops/s"},
	"s":           {1000, "ms"},
	"percentunit": {100, "%"},
	"short":       {1, ""},
}

// The run's events, shaded in every panel: what moved the lines.
var renderEvents = []struct {
	from, to time.Duration
	colour   color.Color
	name     string
}{
	{renderBadConfig, renderFixConfig, color.RGBA{R: 255, G: 236, B: 179, A: 255},
		fmt.Sprintf("a bad configuration in place (%g to %g s): rejected, the previous one stays", renderBadConfig.Seconds(), renderFixConfig.Seconds())},
	{renderRedisDown, renderRedisUp, color.Gray{Y: 226},
		fmt.Sprintf("Redis stopped (%g to %g s): the breaker opens, on_error: open decides", renderRedisDown.Seconds(), renderRedisUp.Seconds())},
}

// A renderedPanel is one dashboard panel drawn from the run, with its
// legend kept apart to go below the data, as Grafana places it.
type renderedPanel struct {
	plot   *plot.Plot
	scale  float64
	legend []legendItem
}

type legendItem struct {
	name  string
	thumb plot.Thumbnailer
}

func sansFont(size vg.Length) text.Style {
	return text.Style{Font: font.From(font.Font{Typeface: "Liberation", Variant: "Sans"}, size), Handler: plot.DefaultTextHandler}
}

// newRenderedPanel starts the panel's plot: its title, its axes labelled
// with the panel's axis label and unit, the run's events shaded.
func newRenderedPanel(p dashboardPanel) *renderedPanel {
	pl := plot.New()
	pl.Title.Text = p.Title
	pl.Title.TextStyle = sansFont(12)
	pl.Title.TextStyle.XAlign, pl.Title.TextStyle.YAlign = text.XCenter, text.YTop
	pl.X.Label.Text = "time since the run started (s)"
	unit := axisUnits[p.FieldConfig.Defaults.Unit]
	pl.Y.Label.Text = p.FieldConfig.Defaults.Custom.AxisLabel
	if unit.label != "" {
		pl.Y.Label.Text += " (" + unit.label + ")"
	}
	for _, a := range []*plot.Axis{&pl.X, &pl.Y} {
		l, tk := a.Label.TextStyle, a.Tick.Label
		a.Label.TextStyle, a.Tick.Label = sansFont(10.5), sansFont(9.5)
		a.Label.TextStyle.XAlign, a.Label.TextStyle.YAlign, a.Label.TextStyle.Rotation = l.XAlign, l.YAlign, l.Rotation
		a.Tick.Label.XAlign, a.Tick.Label.YAlign = tk.XAlign, tk.YAlign
	}
	pl.Y.Min = 0
	pl.Y.Tick.Marker = plainTicks{}
	pl.X.Min, pl.X.Max = 0, renderRun.Seconds()
	for _, e := range renderEvents {
		pl.Add(&eventBand{from: e.from.Seconds(), to: e.to.Seconds(), colour: e.colour})
	}
	grid := plotter.NewGrid()
	grid.Vertical.Color, grid.Horizontal.Color = color.Gray{Y: 200}, color.Gray{Y: 200}
	pl.Add(grid)
	return &renderedPanel{plot: pl, scale: math.Max(unit.scale, 1)}
}

// add draws one series, its times made seconds since start.
func (rp *renderedPanel) add(name string, points [][2]float64, start time.Time) error {
	xys := make(plotter.XYs, 0, len(points))
	for _, pt := range points {
		xys = append(xys, plotter.XY{X: pt[0] - float64(start.Unix()), Y: pt[1] * rp.scale})
	}
	line, err := plotter.NewLine(xys)
	if err != nil {
		return err
	}
	line.Color = plotutil.Color(len(rp.legend))
	line.Width = vg.Points(1.5)
	rp.plot.Add(line)
	rp.legend = append(rp.legend, legendItem{name, line})
	return nil
}

// plainTicks are the default ticks labelled without trailing zeros: 5000
// and 2.5 rather than 5000.00 and 2.50.
type plainTicks struct{}

func (plainTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	for i, t := range ticks {
		if strings.Contains(t.Label, ".") {
			ticks[i].Label = strings.TrimSuffix(strings.TrimRight(t.Label, "0"), ".")
		}
	}
	return ticks
}

// An eventBand shades the span of an event across a panel's whole height.
type eventBand struct {
	from, to float64
	colour   color.Color
}

func (b *eventBand) Plot(c draw.Canvas, p *plot.Plot) {
	trX, _ := p.Transforms(&c)
	c.FillPolygon(b.colour, c.ClipPolygonX([]vg.Point{
		{X: trX(b.from), Y: c.Min.Y}, {X: trX(b.from), Y: c.Max.Y}, {X: trX(b.to), Y: c.Max.Y}, {X: trX(b.to), Y: c.Min.Y}}))
}

func (b *eventBand) Thumbnail(c *draw.Canvas) {
	c.FillPolygon(b.colour, []vg.Point{c.Min, {X: c.Min.X, Y: c.Max.Y}, c.Max, {X: c.Max.X, Y: c.Min.Y}})
}

// Layout of the picture.
const (
	renderCols       = 2
	renderLegendCols = 3
	renderWidth      = 12 * vg.Inch
	renderPlotHeight = 2.9 * vg.Inch
	renderPad        = 4 * vg.Millimeter
)

// drawDashboard lays the panels out two by row, in the dashboard's order,
// each with its legend in columns below its data; a heading names the run
// and its events.
func drawDashboard(panels []*renderedPanel) vg.CanvasWriterTo {
	legendStyle := sansFont(10)
	entryH := legendStyle.Height("Mg") + vg.Points(3)
	legendRows := 1
	for _, p := range panels {
		legendRows = max(legendRows, (len(p.legend)+renderLegendCols-1)/renderLegendCols)
	}
	legendH := vg.Length(legendRows) * entryH
	rows := (len(panels) + renderCols - 1) / renderCols
	cellH := renderPlotHeight + legendH + renderPad
	headingH := 3 * entryH
	img := vgimg.NewWith(vgimg.UseWH(renderWidth, headingH+vg.Length(rows)*cellH+2*renderPad), vgimg.UseDPI(120))
	dc := draw.New(img)
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	dc = draw.Crop(dc, renderPad, -renderPad, renderPad, -renderPad)

	title := sansFont(13)
	title.XAlign, title.YAlign = text.XCenter, text.YTop
	dc.FillText(title, vg.Point{X: dc.Center().X, Y: dc.Max.Y},
		fmt.Sprintf("deploy/grafana/sluice.json from a real run: sluice serve on Redis under sluice bench for %g s, Prometheus scraping every %g s",
			renderRun.Seconds(), renderScrapeStep.Seconds()))
	heading := dc
	heading.Max.Y -= title.Height("Mg") + vg.Points(4)
	heading.Min.Y = heading.Max.Y - entryH
	var events []legendItem
	for _, e := range renderEvents {
		events = append(events, legendItem{e.name, &eventBand{colour: e.colour}})
	}
	drawLegend(heading, events, len(events))
	dc.Max.Y -= headingH

	tiles := draw.Tiles{Rows: rows, Cols: renderCols, PadX: renderPad, PadY: renderPad}
	for i, p := range panels {
		cell := tiles.At(dc, i%renderCols, i/renderCols)
		p.plot.Draw(draw.Crop(cell, 0, 0, legendH+vg.Points(2), 0))
		under := cell
		under.Max.Y = cell.Min.Y + legendH
		drawLegend(under, p.legend, renderLegendCols)
	}
	return vgimg.PngCanvas{Canvas: img}
}

// drawLegend draws items from the top of c in cols columns, row by row.
func drawLegend(c draw.Canvas, items []legendItem, cols int) {
	w := (c.Max.X - c.Min.X) / vg.Length(cols)
	for col := range cols {
		l := plot.NewLegend()
		l.TextStyle = sansFont(10)
		l.Top, l.Left = true, true
		l.Padding = vg.Points(3)
		for i := col; i < len(items); i += cols {
			l.Add(items[i].name, items[i].thumb)
		}
		sub := c
		sub.Min.X = c.Min.X + vg.Length(col)*w
		sub.Max.X = sub.Min.X + w
		l.Draw(sub)
	}
}
