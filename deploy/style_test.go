package deploy

import (
	"encoding/json"
	"fmt"
	"image/color"
	"regexp"
	"strings"
	"testing"
)

// A fieldOverride is one of a panel's fieldConfig.overrides: properties
// given to the series its matcher picks (Grafana applies them in order, a
// later one winning).
type fieldOverride struct {
	Matcher struct {
		ID      string `json:"id"`
		Options string `json:"options"`
	} `json:"matcher"`
	Properties []struct {
		ID    string          `json:"id"`
		Value json.RawMessage `json:"value"`
	} `json:"properties"`
}

// A seriesStyle is how Grafana draws one series of a panel: its fixed
// colour (a Grafana colour name or #rrggbb) and its line's fill (solid,
// dash or dot).
type seriesStyle struct {
	colour string
	fill   string
}

// styleOf resolves the style of the series named name in p as Grafana
// does: the panel's default colour, then every override matching the name.
// A matcher or property the picture cannot draw is an error, so that the
// picture never silently differs from Grafana.
func styleOf(p dashboardPanel, name string) (seriesStyle, error) {
	st := seriesStyle{fill: "solid"}
	if c := p.FieldConfig.Defaults.Color; c.Mode == "fixed" {
		st.colour = c.FixedColor
	} else if c.Mode != "" {
		return st, fmt.Errorf("panel %q: colour mode %q, want fixed", p.Title, c.Mode)
	}
	for _, o := range p.FieldConfig.Overrides {
		var match bool
		switch o.Matcher.ID {
		case "byName":
			match = name == o.Matcher.Options
		case "byRegexp":
			re, err := regexp.Compile(o.Matcher.Options)
			if err != nil {
				return st, fmt.Errorf("panel %q: override %q: %v", p.Title, o.Matcher.Options, err)
			}
			match = re.MatchString(name)
		default:
			return st, fmt.Errorf("panel %q: override matcher %q, want byName or byRegexp", p.Title, o.Matcher.ID)
		}
		if !match {
			continue
		}
		for _, prop := range o.Properties {
			switch prop.ID {
			case "color":
				var v struct{ Mode, FixedColor string }
				if err := json.Unmarshal(prop.Value, &v); err != nil || v.Mode != "fixed" {
					return st, fmt.Errorf("panel %q: override %q: colour %s, want a fixed one", p.Title, o.Matcher.Options, prop.Value)
				}
				st.colour = v.FixedColor
			case "custom.lineStyle":
				var v struct{ Fill string }
				if err := json.Unmarshal(prop.Value, &v); err != nil || lineDashes[v.Fill] == nil && v.Fill != "solid" {
					return st, fmt.Errorf("panel %q: override %q: line style %s", p.Title, o.Matcher.Options, prop.Value)
				}
				st.fill = v.Fill
			default:
				return st, fmt.Errorf("panel %q: override %q sets %q, which the picture does not draw", p.Title, o.Matcher.Options, prop.ID)
			}
		}
	}
	return st, nil
}

// grafanaColours are the RGB values of the Grafana colour names the
// dashboard uses (Grafana's named colour palette).
var grafanaColours = map[string]color.RGBA{
	"semi-dark-green": {R: 86, G: 166, B: 75, A: 255},
	"red":             {R: 242, G: 73, B: 92, A: 255},
	"orange":          {R: 255, G: 152, B: 48, A: 255},
	"blue":            {R: 87, G: 148, B: 242, A: 255},
	"dark-blue":       {R: 31, G: 96, B: 196, A: 255},
	"dark-yellow":     {R: 224, G: 180, B: 0, A: 255},
}

// rgb is the colour a Grafana colour name or #rrggbb stands for.
func rgb(name string) (color.RGBA, error) {
	if c, ok := grafanaColours[name]; ok {
		return c, nil
	}
	var c color.RGBA
	if _, err := fmt.Sscanf(name, "#%02x%02x%02x", &c.R, &c.G, &c.B); err != nil || len(name) != 7 {
		return c, fmt.Errorf("colour %q: not one of %d Grafana names the picture knows, nor #rrggbb", name, len(grafanaColours))
	}
	c.A = 255
	return c, nil
}

// What each colour means, in every panel: a reader who learns it from one
// panel reads the others. Store errors and denials are both red: each is
// what went wrong in its panel.
var colourMeaning = map[string]string{
	"allowed": "semi-dark-green", "success": "semi-dark-green", "closed": "semi-dark-green",
	"denied": "red", "failure": "red", "open": "red", "store error": "red",
	"shadow_denied": "orange",
	"half_open":     "dark-yellow", "decided by the fail policy": "dark-yellow",
	"latency p50": "blue", "latency p99": "dark-blue",
	"neutral (the version)": "#8e8e8e",
}

// seriesMeaning says, for each panel, what a series of it means, from its
// labels: the key to colourMeaning.
var seriesMeaning = map[string]func(labels map[string]string) string{
	"Decisions per second by policy and result":              func(l map[string]string) string { return l["decision"] },
	"Denial ratio by policy":                                 func(map[string]string) string { return "denied" },
	"Decision latency p50 / p99 (store round trip included)": func(l map[string]string) string { return "latency " + l["quantile"] },
	"Store errors per second, by cause":                      func(map[string]string) string { return "store error" },
	"Store circuit breaker: pods per state":                  func(l map[string]string) string { return l["state"] },
	"Degraded decisions per second":                          func(map[string]string) string { return "decided by the fail policy" },
	"Configuration reloads":                                  func(l map[string]string) string { return l["result"] },
	"Pods by version":                                        func(map[string]string) string { return "neutral (the version)" },
}

// labelValues are the values each label of the dashboard's series takes:
// those the service exports (internal/service/metrics.go), and a few of
// the user's (policies, instances, versions).
var labelValues = map[string][]string{
	"policy":   {"api_per_key", "login_attempts", "anything_else"},
	"decision": {"allowed", "denied", "shadow_denied"},
	"cause":    {"timeout", "connection", "error"},
	"instance": {"sluice-0", "10.0.0.7:8082"},
	"state":    {"closed", "open", "half_open"},
	"on_error": {"local", "closed", "open"},
	"result":   {"success", "failure"},
	"version":  {"v1.0.0", "devel"},
}

// legendLabels matches the {{label}} fields of a legend format.
var legendLabels = regexp.MustCompile(`{{(\w+)}}`)

// TestDashboardColours: a colour means one thing in every panel of the
// dashboard (and of docs/deploy-dashboard.png, drawn with the same styles):
// every series any panel can show has a fixed colour, the one its meaning
// has in colourMeaning, and the store errors' causes differ by line style.
func TestDashboardColours(t *testing.T) {
	for _, p := range readDashboard(t).Panels {
		meaning, ok := seriesMeaning[p.Title]
		if !ok {
			t.Errorf("panel %q: no meaning given to its series' colours (seriesMeaning)", p.Title)
			continue
		}
		fills := map[string]string{}
		for _, q := range p.Targets {
			for _, labels := range expandLabels(legendLabels.FindAllStringSubmatch(q.LegendFormat, -1)) {
				name := legend(q.LegendFormat, labels)
				if !strings.Contains(q.LegendFormat, "{{") {
					labels = map[string]string{"quantile": name}
				}
				st, err := styleOf(p, name)
				if err != nil {
					t.Error(err)
					continue
				}
				want := colourMeaning[meaning(labels)]
				if want == "" || st.colour != want {
					t.Errorf("panel %q: series %q is %q, want %q (what %q means)", p.Title, name, st.colour, want, meaning(labels))
				}
				if _, err := rgb(st.colour); st.colour != "" && err != nil {
					t.Errorf("panel %q: series %q: %v", p.Title, name, err)
				}
				if cause := labels["cause"]; cause != "" {
					if other, seen := fills[st.fill]; seen && other != cause {
						t.Errorf("panel %q: causes %s and %s are both drawn %s", p.Title, other, cause, st.fill)
					}
					fills[st.fill] = cause
				}
			}
		}
	}
}

// expandLabels returns every combination of labelValues for the labels
// fields names (one empty set when there are none).
func expandLabels(fields [][]string) []map[string]string {
	sets := []map[string]string{{}}
	for _, f := range fields {
		var next []map[string]string
		for _, s := range sets {
			for _, v := range labelValues[f[1]] {
				n := map[string]string{f[1]: v}
				for k, w := range s {
					n[k] = w
				}
				next = append(next, n)
			}
		}
		sets = next
	}
	return sets
}
