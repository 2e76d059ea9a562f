package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/sluicehq/sluice/internal/redistest"
)

const (
	alertsFile    = "prometheus/alerts.yaml"
	dashboardFile = "grafana/sluice.json"
)

// promtool runs promtool from the Debian package prometheus.
func promtool(t *testing.T, args ...string) string {
	t.Helper()
	bin, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("promtool is not installed: run make deploy-test, which installs it")
		}
		t.Skip("promtool is not installed: run make deploy-test, which installs it")
	}
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func TestAlertRules(t *testing.T) {
	promtool(t, "check", "rules", alertsFile)
	out := promtool(t, "test", "rules", "prometheus/alerts_test.yaml")
	if !strings.Contains(out, "SUCCESS") {
		t.Fatalf("promtool test rules:\n%s", out)
	}
	// Every alert is unit tested and has its runbook.
	for _, r := range alertRules(t) {
		if r.Annotations["runbook"] == "" || r.Annotations["summary"] == "" || r.Labels["severity"] == "" {
			t.Errorf("alert %s: want a severity, a summary and a runbook", r.Alert)
		}
	}
	tests, err := os.ReadFile("prometheus/alerts_test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range alertRules(t) {
		if !bytes.Contains(tests, []byte("alertname: "+r.Alert+"\n")) {
			t.Errorf("alert %s has no promtool unit test", r.Alert)
		}
	}
}

type alertRule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

func alertRules(t *testing.T) []alertRule {
	t.Helper()
	raw, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Name  string      `json:"name"`
			Rules []alertRule `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.UnmarshalStrict(raw, &f); err != nil {
		t.Fatal(err)
	}
	var rules []alertRule
	for _, g := range f.Groups {
		rules = append(rules, g.Rules...)
	}
	if len(rules) == 0 {
		t.Fatal("no alert rules")
	}
	return rules
}

// dashboard is the part of the Grafana dashboard model the tests read.
type dashboard struct {
	Title  string           `json:"title"`
	Panels []dashboardPanel `json:"panels"`
}

// dashboardPanel is one panel of the dashboard.
type dashboardPanel struct {
	ID          int                      `json:"id"`
	Title       string                   `json:"title"`
	Type        string                   `json:"type"`
	GridPos     struct{ H, W, X, Y int } `json:"gridPos"`
	FieldConfig struct {
		Defaults struct {
			Unit  string `json:"unit"`
			Color struct {
				Mode       string `json:"mode"`
				FixedColor string `json:"fixedColor"`
			} `json:"color"`
			Custom struct {
				AxisLabel string `json:"axisLabel"`
			} `json:"custom"`
		} `json:"defaults"`
		Overrides []fieldOverride `json:"overrides"`
	} `json:"fieldConfig"`
	Targets []struct {
		RefID        string `json:"refId"`
		Expr         string `json:"expr"`
		LegendFormat string `json:"legendFormat"`
	} `json:"targets"`
}

// readDashboard reads the shipped dashboard.
func readDashboard(t *testing.T) dashboard {
	t.Helper()
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

// dashboardQueries returns every PromQL expression of the dashboard, its
// variables replaced by values Prometheus accepts.
func dashboardQueries(t *testing.T) map[string]string {
	t.Helper()
	d := readDashboard(t)
	vars := strings.NewReplacer("$__rate_interval", "1m", "$job", ".+")
	queries := map[string]string{}
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] || p.Title == "" || len(p.Targets) == 0 || p.GridPos.W == 0 || p.GridPos.H == 0 {
			t.Errorf("panel %d %q: want a unique id, a title, a size and queries", p.ID, p.Title)
		}
		ids[p.ID] = true
		for _, q := range p.Targets {
			if q.Expr == "" || q.RefID == "" {
				t.Errorf("panel %q: a query without refId or expr", p.Title)
			}
			queries[fmt.Sprintf("%s/%s", p.Title, q.RefID)] = vars.Replace(q.Expr)
		}
	}
	return queries
}

// TestDashboardQueriesParse has promtool parse every dashboard query, as a
// recording rule.
func TestDashboardQueriesParse(t *testing.T) {
	queries := dashboardQueries(t)
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range queries {
			if !yield(k) {
				return
			}
		}
	})
	for i, name := range names {
		expr, _ := json.Marshal(queries[name]) // a JSON string is a YAML string
		fmt.Fprintf(&rules, "      - record: dashboard:query_%d\n        expr: %s\n", i, expr)
	}
	file := filepath.Join(t.TempDir(), "dashboard_rules.yaml")
	if err := os.WriteFile(file, []byte(rules.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out := promtool(t, "check", "rules", file)
	if want := fmt.Sprintf("SUCCESS: %d rules found", len(queries)); !strings.Contains(out, want) {
		t.Fatalf("promtool check rules: want %q, got\n%s", want, out)
	}
}

var (
	metricName = regexp.MustCompile(`\b(sluice_[a-z0-9_]+)(\{[^}]*\})?`)
	matcher    = regexp.MustCompile(`([a-z_]+)="([^"]*)"`)
	sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})? `)
)

// TestMetricsExist scrapes a live sluice serve on a real Redis and checks
// that every metric the dashboard and the alerts use, and every label value
// they match on, is exported.
func TestMetricsExist(t *testing.T) {
	redis := redistest.Start(t)
	config := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(config, []byte(`store:
  url: `+redis.URL()+`
policies:
  - {name: tight, algorithm: fixed_window, limit: 1, period: 1h}
  - {name: trial, algorithm: fixed_window, limit: 1, period: 1h, shadow: true}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	base := startServe(t, "--config", config)
	for range 2 {
		check(t, base, "tight", "k")
		check(t, base, "trial", "k")
	}
	status, scrape := httpGet(t, base+"/metrics")
	if status != 200 {
		t.Fatalf("GET /metrics: %d", status)
	}

	// series maps each exported name to the label sets of its samples.
	series := map[string][]string{}
	for line := range strings.SplitSeq(scrape, "\n") {
		if m := sampleLine.FindStringSubmatch(line); m != nil {
			series[m[1]] = append(series[m[1]], m[2])
		}
	}
	uses := map[string]string{} // expression → where it is
	for _, r := range alertRules(t) {
		uses[r.Expr] = "alert " + r.Alert
	}
	for where, expr := range dashboardQueries(t) {
		uses[expr] = "dashboard panel " + where
	}
	used := 0
	for expr, where := range uses {
		for _, m := range metricName.FindAllStringSubmatch(expr, -1) {
			used++
			name, sets := m[1], series[m[1]]
			if len(sets) == 0 {
				t.Errorf("%s uses %s, which a live sluice serve does not export", where, name)
				continue
			}
			for _, lm := range matcher.FindAllStringSubmatch(m[2], -1) {
				want := lm[1] + `="` + lm[2] + `"`
				if !slices.ContainsFunc(sets, func(s string) bool { return strings.Contains(s, want) }) {
					t.Errorf("%s matches %s{%s}, which no exported series has", where, name, want)
				}
			}
		}
	}
	if used == 0 {
		t.Fatal("found no metric names in the dashboard and alerts")
	}
}
