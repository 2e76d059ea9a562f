package deploy

import (
	"fmt"
	"image/color"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/sluicehq/sluice/internal/config"
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

// A renderEvent is one of the run's events, shaded in every panel: what
// moved the lines.
type renderEvent struct {
	from, to time.Duration
	colour   color.Color
	name     string
}

// renderEvents are the run's events, the outage's said as the fail policy
// of store decides it.
func renderEvents(store config.Store) []renderEvent {
	outage := "on_error: " + store.OnError + " decides"
	switch store.OnError {
	case "", config.OnErrorLocal:
		outage = fmt.Sprintf("each pod decides alone (on_error: local), every limit divided by store.nodes = %d", store.Nodes)
	case config.OnErrorClosed:
		outage = "every request is denied (on_error: closed)"
	}
	return []renderEvent{
		{renderBadConfig, renderFixConfig, color.RGBA{R: 255, G: 236, B: 179, A: 255},
			fmt.Sprintf("a bad configuration in place (%g to %g s): rejected, the previous one stays", renderBadConfig.Seconds(), renderFixConfig.Seconds())},
		{renderRedisDown, renderRedisUp, color.Gray{Y: 226},
			fmt.Sprintf("Redis stopped (%g to %g s): the breaker opens; %s", renderRedisDown.Seconds(), renderRedisUp.Seconds(), outage)},
	}
}

// A renderedPanel is one dashboard panel drawn from the run, with its
// legend kept apart to go below the data, as Grafana places it.
type renderedPanel struct {
	panel  dashboardPanel
	plot   *plot.Plot
	scale  float64
	legend []legendItem
}

// lineDashes draws Grafana's line fills (custom.lineStyle): dashes and
// gaps, in points.
var lineDashes = map[string][]vg.Length{
	"dash": {vg.Points(6), vg.Points(3)},
	"dot":  {vg.Points(1.5), vg.Points(2.5)},
}

// renderPolicyFills tells the run's policies apart where colour says
// something else (allowed or denied): the line style of each policy's
// series, the same in every panel, in the order the legends list them.
var renderPolicyFills = []struct{ policy, fill string }{
	{"api_per_key", "solid"}, {"login_attempts", "dash"}, {"api_per_ip_trial", "dot"},
}

// policyRank is policy's place in renderPolicyFills (after them all if
// it is not there).
func policyRank(policy string) int {
	for i, p := range renderPolicyFills {
		if p.policy == policy {
			return i
		}
	}
	return len(renderPolicyFills)
}

// seriesOrder orders a panel's series for its legend: by the labels other
// than the policy (a decision, a state), then the policy.
func seriesOrder(a, b series) int {
	if c := strings.Compare(fmt.Sprint(withoutPolicy(a.labels)), fmt.Sprint(withoutPolicy(b.labels))); c != 0 {
		return c
	}
	return policyRank(a.labels["policy"]) - policyRank(b.labels["policy"])
}

type legendItem struct {
	name  string
	thumb plot.Thumbnailer
	group string // items of one group stand in one column when they can
}

func sansFont(size vg.Length) text.Style {
	return text.Style{Font: font.From(font.Font{Typeface: "Liberation", Variant: "Sans"}, size), Handler: plot.DefaultTextHandler}
}

// newRenderedPanel starts the panel's plot: its title, its axes labelled
// with the panel's axis label and unit, the run's events shaded.
func newRenderedPanel(p dashboardPanel, events []renderEvent) *renderedPanel {
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
	for _, e := range events {
		pl.Add(&eventBand{from: e.from.Seconds(), to: e.to.Seconds(), colour: e.colour})
	}
	grid := plotter.NewGrid()
	grid.Vertical.Color, grid.Horizontal.Color = color.Gray{Y: 200}, color.Gray{Y: 200}
	pl.Add(grid)
	return &renderedPanel{panel: p, plot: pl, scale: math.Max(unit.scale, 1)}
}

// add draws one series in the style the dashboard gives it, its times made
// seconds since start. A series the dashboard gives no colour is an error:
// a palette's next colour would mean nothing.
func (rp *renderedPanel) add(name string, labels map[string]string, points [][2]float64, start time.Time) error {
	st, err := styleOf(rp.panel, name)
	if err != nil {
		return err
	}
	if st.colour == "" {
		return fmt.Errorf("panel %q: series %q has no fixed colour in the dashboard", rp.panel.Title, name)
	}
	c, err := rgb(st.colour)
	if err != nil {
		return fmt.Errorf("panel %q: series %q: %v", rp.panel.Title, name, err)
	}
	if i := policyRank(labels["policy"]); i < len(renderPolicyFills) && st.fill == "solid" {
		st.fill = renderPolicyFills[i].fill
	}
	xys := make(plotter.XYs, 0, len(points))
	for _, pt := range points {
		xys = append(xys, plotter.XY{X: pt[0] - float64(start.Unix()), Y: pt[1] * rp.scale})
	}
	line, err := plotter.NewLine(xys)
	if err != nil {
		return err
	}
	line.Color, line.Dashes = c, lineDashes[st.fill]
	line.Width = vg.Points(1.5)
	rp.plot.Add(line)
	rp.legend = append(rp.legend, legendItem{name, line, fmt.Sprint(withoutPolicy(labels))})
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
	renderLegendCols = 2
	renderKeyCols    = 4
	renderWidth      = 12 * vg.Inch
	renderPlotHeight = 2.9 * vg.Inch
	renderPad        = 4 * vg.Millimeter
)

// colourKey is the heading's key to the colours: what each means, in every
// panel (colourMeaning).
func colourKey() []legendItem {
	var key []legendItem
	for _, c := range []string{"semi-dark-green", "red", "orange", "dark-yellow", "blue", "dark-blue", "#8e8e8e"} {
		var means []string
		for m, mc := range colourMeaning {
			if mc == c {
				means = append(means, m)
			}
		}
		slices.Sort(means)
		rgba, _ := rgb(c)
		key = append(key, legendItem{name: strings.Join(means, ", "), thumb: &plotter.Line{LineStyle: draw.LineStyle{Color: rgba, Width: vg.Points(2.5)}}})
	}
	return key
}

// styleNote says what the line styles tell apart.
var styleNote = func() string {
	var fills []string
	for _, p := range renderPolicyFills {
		fills = append(fills, map[string]string{"solid": "solid", "dash": "dashed", "dot": "dotted"}[p.fill]+" "+p.policy)
	}
	return "Line styles tell apart the series of one colour: the policy (" + strings.Join(fills, ", ") + "), or the store error's cause."
}()

// drawDashboard lays the panels out two by row, in the dashboard's order,
// each with its legend in columns below its data; a heading names the run,
// what the colours mean and the run's events.
func drawDashboard(panels []*renderedPanel, events []renderEvent) vg.CanvasWriterTo {
	legendStyle := sansFont(10)
	entryH := legendStyle.Height("Mg") + vg.Points(3)
	rowsOf := func(items []legendItem, cols int) int {
		n := 1
		for _, c := range legendColumns(items, cols) {
			n = max(n, len(c))
		}
		return n
	}
	legendRows := 1
	for _, p := range panels {
		legendRows = max(legendRows, rowsOf(p.legend, renderLegendCols))
	}
	key := colourKey()
	keyRows := rowsOf(key, renderKeyCols)
	legendH := vg.Length(legendRows) * entryH
	rows := (len(panels) + renderCols - 1) / renderCols
	cellH := renderPlotHeight + legendH + renderPad
	headingH := vg.Length(2+keyRows+1+len(events)) * entryH
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
	top := dc.Max.Y - title.Height("Mg") - vg.Points(6)
	nextRows := func(n int) draw.Canvas { // the next n rows of the heading
		c := dc
		c.Max.Y, c.Min.Y = top, top-vg.Length(n)*entryH
		top = c.Min.Y
		return c
	}
	drawLegend(nextRows(keyRows), key, renderKeyCols)
	note := legendStyle
	note.XAlign, note.YAlign = text.XLeft, text.YTop
	noteRow := nextRows(1)
	dc.FillText(note, vg.Point{X: noteRow.Min.X + vg.Points(3), Y: noteRow.Max.Y - vg.Points(2)}, styleNote)
	var bands []legendItem
	for _, e := range events {
		bands = append(bands, legendItem{name: e.name, thumb: &eventBand{colour: e.colour}})
	}
	drawLegend(nextRows(len(bands)), bands, 1)
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

// withoutPolicy is labels less the policy: what a series of a policy is.
func withoutPolicy(labels map[string]string) map[string]string {
	l := maps.Clone(labels)
	delete(l, "policy")
	return l
}

// legendColumns splits items into at most cols columns: a column per group
// when there are no more groups than columns (the policies' allowed in
// one, their denied in the next), else filled one after the other.
func legendColumns(items []legendItem, cols int) [][]legendItem {
	var groups [][]legendItem
	for i, it := range items {
		if i == 0 || it.group != items[i-1].group {
			groups = append(groups, nil)
		}
		groups[len(groups)-1] = append(groups[len(groups)-1], it)
	}
	if len(groups) <= cols && len(groups) > 1 {
		return groups
	}
	perCol := max(1, (len(items)+cols-1)/cols)
	var columns [][]legendItem
	for ; len(items) > 0; items = items[min(perCol, len(items)):] {
		columns = append(columns, items[:min(perCol, len(items))])
	}
	return columns
}

// drawLegend draws items from the top of c in cols columns (legendColumns),
// each as wide as its longest entry and a share of the room left, or a
// cols-th of c's width when the entries do not fit.
func drawLegend(c draw.Canvas, items []legendItem, cols int) {
	columns := legendColumns(items, cols)
	style := sansFont(10)
	even := (c.Max.X - c.Min.X) / vg.Length(cols)
	widths := make([]vg.Length, len(columns))
	var total vg.Length
	for i, column := range columns {
		for _, it := range column {
			widths[i] = max(widths[i], style.Width(it.name)+vg.Points(40)) // the thumbnail, padding and a gap
		}
		total += widths[i]
	}
	spare := (c.Max.X - c.Min.X - total) / vg.Length(cols) // shared out, so that columns line up when they can
	x := c.Min.X
	for i, column := range columns {
		l := plot.NewLegend()
		l.TextStyle = style
		l.Top, l.Left = true, true
		l.Padding = vg.Points(3)
		for _, it := range column {
			l.Add(it.name, it.thumb)
		}
		w := widths[i] + spare
		if spare < 0 {
			w = even
		}
		sub := c
		sub.Min.X, sub.Max.X = x, x+w
		x += w
		l.Draw(sub)
	}
}
