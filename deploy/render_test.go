package deploy

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"image/color"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/sluicehq/sluice/internal/redistest"
)

// renderFile turns on TestRenderDashboard: make dashboard-png sets it to
// docs/deploy-dashboard.png.
var renderFile = flag.String("render", "", "draw the dashboard's panels from a real run into this PNG `file`")

// The run TestRenderDashboard draws: load all along, a bad configuration
// applied and fixed, and Redis down for a while.
const (
	renderRun        = 60 * time.Second
	renderBadConfig  = 10 * time.Second
	renderFixConfig  = 14 * time.Second
	renderRedisDown  = 25 * time.Second
	renderRedisUp    = 40 * time.Second
	renderScrapeStep = time.Second
)

const renderConfig = `store:
  url: %s
  timeout: 50ms
  on_error: open
policies:
  - {name: api_per_key, algorithm: gcra, limit: 600, period: 1m, burst: 20}
  - {name: login_attempts, algorithm: sliding_log, limit: 5, period: 1m}
  - {name: api_per_ip_trial, algorithm: sliding_window, limit: 300, period: 1m, shadow: true}
`

// TestRenderDashboard runs sluice serve on a real Redis under sluice bench,
// scraped by a real Prometheus, and draws every dashboard query over the run.
func TestRenderDashboard(t *testing.T) {
	if *renderFile == "" {
		t.Skip("draws docs/deploy-dashboard.png: make dashboard-png")
	}
	promBin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatal("prometheus is not installed (Debian package prometheus)")
	}
	redis := redistest.Start(t)
	dir := t.TempDir()
	config := filepath.Join(dir, "sluice.yaml")
	writeAtomic(t, config, fmt.Sprintf(renderConfig, redis.URL()))
	base := startServe(t, "--config", config)

	promURL := startPrometheus(t, promBin, strings.TrimPrefix(base, "http://"))
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), renderRun)
	defer cancel()
	for _, b := range []struct {
		policy string
		keys   int
	}{{"api_per_key", 50}, {"login_attempts", 20}, {"api_per_ip_trial", 10}} {
		cmd := exec.CommandContext(ctx, sluiceBinary(t), "bench", "--target", base, "--policy", b.policy,
			"--keys", strconv.Itoa(b.keys), "--concurrency", "2", "--duration", renderRun.String(), "--quiet")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	}
	at := func(d time.Duration) { time.Sleep(time.Until(start.Add(d))) }
	at(renderBadConfig)
	writeAtomic(t, config, "policies: [{name: broken, algorithm: nope}]\n")
	at(renderFixConfig)
	writeAtomic(t, config, fmt.Sprintf(renderConfig, redis.URL()))
	at(renderRedisDown)
	redis.Kill()
	at(renderRedisUp)
	redis.Restart()
	at(renderRun)
	end := time.Now()
	time.Sleep(3 * renderScrapeStep) // the last scrapes

	var d dashboard
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	vars := strings.NewReplacer("$__rate_interval", "5s", "$job", ".+")
	var plots []*plot.Plot
	for _, p := range d.Panels {
		pl := plot.New()
		pl.Title.Text = p.Title
		pl.X.Label.Text = "seconds"
		pl.Y.Min = 0
		pl.Legend.Top = true
		pl.Legend.Left = true
		pl.Add(plotter.NewGrid())
		n := 0
		for _, q := range p.Targets {
			for _, s := range queryRange(t, promURL, vars.Replace(q.Expr), start, end) {
				if len(p.Targets) == 1 && !slices.ContainsFunc(s.points, func(pt [2]float64) bool { return pt[1] != 0 }) {
					continue // a series that stayed 0 (say, shadow_denied of an enforced policy) only crowds the legend
				}
				xys := make(plotter.XYs, 0, len(s.points))
				for _, pt := range s.points {
					xys = append(xys, plotter.XY{X: pt[0] - float64(start.Unix()), Y: pt[1]})
				}
				line, err := plotter.NewLine(xys)
				if err != nil {
					t.Fatal(err)
				}
				line.Color = plotutil.Color(n)
				line.Width = vg.Points(1.5)
				pl.Add(line)
				pl.Legend.Add(legend(q.LegendFormat, s.labels), line)
				n++
			}
		}
		plots = append(plots, pl)
	}
	const cols = 2
	rows := (len(plots) + cols - 1) / cols
	grid := make([][]*plot.Plot, rows)
	for i, p := range plots {
		grid[i/cols] = append(grid[i/cols], p)
	}
	for len(grid[rows-1]) < cols {
		grid[rows-1] = append(grid[rows-1], nil)
	}
	img := vgimg.New(12*vg.Inch, vg.Length(rows)*3*vg.Inch)
	dc := draw.New(img)
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	canvases := plot.Align(grid, draw.Tiles{Rows: rows, Cols: cols, PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 4, PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}, dc)
	for r := range grid {
		for c, p := range grid[r] {
			if p != nil {
				p.Draw(canvases[r][c])
			}
		}
	}
	f, err := os.Create(*renderFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		t.Fatal(err)
	}
}

// writeAtomic replaces file's content in one rename, as an editor or the
// kubelet would.
func writeAtomic(t *testing.T, file, text string) {
	t.Helper()
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, file); err != nil {
		t.Fatal(err)
	}
}

// startPrometheus runs a real Prometheus on 127.0.0.1 that scrapes target
// every renderScrapeStep, and returns its URL.
func startPrometheus(t *testing.T, bin, target string) string {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`global:
  scrape_interval: %s
scrape_configs:
  - job_name: sluice
    static_configs:
      - targets: [%q]
`, renderScrapeStep, target)), 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(bin, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	promURL := "http://" + addr
	deadline := time.Now().Add(startTimeout)
	for {
		resp, err := http.Get(promURL + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return promURL
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus did not become ready within %v", startTimeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

type series struct {
	labels map[string]string
	points [][2]float64
}

// queryRange asks Prometheus for expr between start and end.
func queryRange(t *testing.T, promURL, expr string, start, end time.Time) []series {
	t.Helper()
	q := url.Values{"query": {expr}, "start": {strconv.FormatInt(start.Unix(), 10)},
		"end": {strconv.FormatInt(end.Unix(), 10)}, "step": {renderScrapeStep.String()}}
	resp, err := http.Get(promURL + "/api/v1/query_range?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Values [][2]any          `json:"values"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	if out.Status != "success" {
		t.Fatalf("query %s: %s", expr, out.Error)
	}
	var ss []series
	for _, r := range out.Data.Result {
		s := series{labels: r.Metric}
		for _, v := range r.Values {
			ts, _ := v[0].(float64)
			y, err := strconv.ParseFloat(fmt.Sprint(v[1]), 64)
			if err != nil || y != y { // NaN: no data at this step
				continue
			}
			s.points = append(s.points, [2]float64{ts, y})
		}
		ss = append(ss, s)
	}
	slices.SortFunc(ss, func(a, b series) int { return strings.Compare(fmt.Sprint(a.labels), fmt.Sprint(b.labels)) })
	return ss
}

// legend fills a Grafana legend format's {{label}} fields.
func legend(format string, labels map[string]string) string {
	for k, v := range labels {
		format = strings.ReplaceAll(format, "{{"+k+"}}", v)
	}
	return format
}
