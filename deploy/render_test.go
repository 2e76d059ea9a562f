package deploy

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
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

	"sigs.k8s.io/yaml"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/testwait"
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

// renderPolicies replace the shipped policies for the run: limits its load
// both meets and exceeds, a sliding log, and a shadow policy.
const renderPolicies = `
- {name: api_per_key, algorithm: gcra, limit: 600, period: 1m, burst: 20}
- {name: login_attempts, algorithm: sliding_log, limit: 5, period: 1m}
- {name: api_per_ip_trial, algorithm: sliding_window, limit: 300, period: 1m, shadow: true}
`

// TestRenderDashboard runs sluice serve on a real Redis under sluice bench,
// scraped by a real Prometheus, and draws every dashboard query over the run.
// The store section is the one the manifests ship (the chart's defaults are
// the same; TestRedisOutageKeepsPodsReady holds both), so the outage shows
// what the shipped fail policy does.
func TestRenderDashboard(t *testing.T) {
	if *renderFile == "" {
		t.Skip("draws docs/deploy-dashboard.png: make dashboard-png")
	}
	promBin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatal("prometheus is not installed (Debian package prometheus)")
	}
	shipped, store := renderConfig(t)
	redis := redistest.Start(t)
	dir := t.TempDir()
	config := filepath.Join(dir, "sluice.yaml")
	writeAtomic(t, config, shipped)
	base := startServe(t, "--config", config, "--store", redis.URL())

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
	writeAtomic(t, config, shipped)
	at(renderRedisDown)
	redis.Kill()
	at(renderRedisUp)
	redis.Restart()
	at(renderRun)
	end := time.Now()
	time.Sleep(3 * renderScrapeStep) // the last scrapes

	events := renderEvents(store)
	var panels []*renderedPanel
	for _, p := range readDashboard(t).Panels {
		rp := newRenderedPanel(p, events)
		for _, q := range p.Targets {
			for _, s := range queryRange(t, promURL, renderVars.Replace(q.Expr), start, end) {
				if len(p.Targets) == 1 && !slices.ContainsFunc(s.points, func(pt [2]float64) bool { return pt[1] != 0 }) {
					continue // a series that stayed 0 (say, shadow_denied of an enforced policy) only crowds the legend
				}
				name := legend(q.LegendFormat, s.labels)
				if strings.Contains(name, "127.0.0.1") {
					t.Errorf("panel %q: series %q names the test's address", p.Title, name)
				}
				if err := rp.add(name, s.labels, s.points, start); err != nil {
					t.Fatal(err)
				}
			}
		}
		if len(rp.legend) == 0 {
			t.Errorf("panel %q: no data from the run", p.Title)
		}
		panels = append(panels, rp)
	}
	f, err := os.Create(*renderFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := drawDashboard(panels, events).WriteTo(f); err != nil {
		t.Fatal(err)
	}
}

// renderConfig returns the manifests' sluice.yaml with renderPolicies in
// place of its policies, and its store section.
func renderConfig(t *testing.T) (string, config.Store) {
	t.Helper()
	o, _ := manifestObjects(t)
	files := checkSluiceObjects(t, &o)
	cfg, _ := checkFailPolicy(t, &o, files)
	var doc map[string]any
	if err := yaml.Unmarshal([]byte(files[0].text), &doc); err != nil {
		t.Fatal(err)
	}
	var policies []any
	if err := yaml.Unmarshal([]byte(renderPolicies), &policies); err != nil {
		t.Fatal(err)
	}
	doc["policies"] = policies
	out, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return string(out), cfg.Store
}

// renderVars gives the dashboard's variables values for the run: the rate
// interval spans five scrapes.
var renderVars = strings.NewReplacer("$__rate_interval", "5s", "$job", ".+")

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

// renderInstance is the instance label of the scraped sluice serve: the
// name a reader sees in the legends, as a pod's, rather than the test's
// random loopback port.
const renderInstance = "sluice-0"

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
        labels:
          instance: %s
`, renderScrapeStep, target, renderInstance)), 0o644); err != nil {
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
	testwait.UntilSaw(t, "prometheus ready", func() (bool, string) {
		resp, err := http.Get(promURL + "/-/ready")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == 200, resp.Status
	})
	return promURL
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
	slices.SortFunc(ss, seriesOrder)
	return ss
}

// legend fills a Grafana legend format's {{label}} fields.
func legend(format string, labels map[string]string) string {
	for k, v := range labels {
		format = strings.ReplaceAll(format, "{{"+k+"}}", v)
	}
	return format
}
