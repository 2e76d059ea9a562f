package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestBinaryLeavesLabOut holds the production binary free of the lab's
// plotting stack (gonum/plot, its fonts, pdf and svg writers): the lab is its
// own command, cmd/sluice-lab.
func TestBinaryLeavesLabOut(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "gonum.org/") || dep == "github.com/sluicehq/sluice/internal/lab" {
			t.Errorf("the sluice binary links %s", dep)
		}
	}
}
