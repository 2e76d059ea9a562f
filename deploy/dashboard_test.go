package deploy

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestDashboardDocumented: docs/deploy.md's table of panels names the
// dashboard's panels by their titles, in their order, and every panel has
// the unit and the axis label its y axis is drawn with, in Grafana and in
// docs/deploy-dashboard.png.
func TestDashboardDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(repoRoot, "docs", "deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(doc), "| panel | shows |\n|---|---|\n")
	if !ok {
		t.Fatal("docs/deploy.md has no table of panels")
	}
	table, _, _ = strings.Cut(table, "\n\n")
	var documented []string
	for line := range strings.SplitSeq(table, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 {
			t.Fatalf("docs/deploy.md: not a table row: %q", line)
		}
		documented = append(documented, strings.TrimSpace(cells[1]))
	}
	var titles []string
	for _, p := range readDashboard(t).Panels {
		titles = append(titles, p.Title)
		if _, ok := axisUnits[p.FieldConfig.Defaults.Unit]; !ok {
			t.Errorf("panel %q: unit %q, want one of the units the picture draws", p.Title, p.FieldConfig.Defaults.Unit)
		}
		if p.FieldConfig.Defaults.Custom.AxisLabel == "" {
			t.Errorf("panel %q: no axis label (fieldConfig.defaults.custom.axisLabel)", p.Title)
		}
	}
	if !slices.Equal(documented, titles) {
		t.Errorf("docs/deploy.md lists the panels\n  %q\nthe dashboard has\n  %q", documented, titles)
	}
}
