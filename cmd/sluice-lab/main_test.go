package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
)

func runCmd(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := runLab(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"boundary", "--nodez", "3"}, []string{"unknown flag --nodez", "did you mean --nodes?", "sluice-lab -h"}},
		{[]string{"--json=maybe"}, []string{`--json "maybe": want true or false`}},
		{nil, []string{"sluice-lab: name a scenario", "boundary"}},
		{[]string{"bondary"}, []string{`unknown scenario "bondary"`}},
		{[]string{"boundary", "race"}, []string{`unexpected argument "race"`}},
		{[]string{"nodes", "--nodes", "5000"}, []string{"sluice-lab: nodes must be 1 to 1000"}},
	} {
		code, _, errOut := runCmd(tc.args...)
		if code == 0 {
			t.Errorf("%v: exit 0", tc.args)
		}
		for _, w := range tc.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("%v: stderr %q lacks %q", tc.args, errOut, w)
			}
		}
	}
}

// TestBoundaryJSON runs one scenario end to end: the scenario may come after
// its flags, and the report is JSON rows naming Sluice's and the naive
// variants.
func TestBoundaryJSON(t *testing.T) {
	code, out, errOut := runCmd("--json", "--nodes", "2", "--limit", "10", "boundary")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var report struct {
		Scenario string `json:"scenario"`
		Rows     []struct {
			Variant   string  `json:"variant"`
			Overshoot float64 `json:"overshoot"`
		} `json:"rows"`
	}
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		t.Fatalf("not a JSON report: %v\n%s", err, out)
	}
	if report.Scenario != "boundary" || len(report.Rows) != 6 {
		t.Fatalf("want boundary's six algorithms: %s", out)
	}
	// The fixed window's edge doubles its limit; the sliding log holds it.
	for _, r := range report.Rows {
		switch r.Variant {
		case "fixed_window":
			if r.Overshoot != 2 {
				t.Errorf("fixed_window overshoot %v, want 2", r.Overshoot)
			}
		case "sliding_log":
			if r.Overshoot != 1 {
				t.Errorf("sliding_log overshoot %v, want 1", r.Overshoot)
			}
		}
	}
}
