package docscheck

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// script is scripts/check-docs.sh, found from this package's directory.
var script = filepath.Join("..", "..", "scripts", "check-docs.sh")

// run runs the check on root and returns its combined output and whether it passed.
func run(t *testing.T, root string) (string, bool) {
	t.Helper()
	out, err := exec.Command("bash", script, root).CombinedOutput()
	if err != nil {
		if _, exit := err.(*exec.ExitError); !exit {
			t.Fatalf("running %s: %v", script, err)
		}
		return string(out), false
	}
	return string(out), true
}

// TestRepositoryDocs: README.md and docs/ of this repository pass.
func TestRepositoryDocs(t *testing.T) {
	if out, ok := run(t, filepath.Join("..", "..")); !ok {
		t.Fatalf("scripts/check-docs.sh found problems in README.md or docs/:\n%s", out)
	}
}

// writeTree creates files (path → content) under a new temporary root.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		path := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// TestGoodLinksPass: every kind of link the docs use resolves, and links in
// code blocks and inline code are not links.
func TestGoodLinksPass(t *testing.T) {
	root := writeTree(t, map[string]string{
		"README.md": "See [the guide](docs/guide.md#why-it-works--twice), [a package](pkg), " +
			"[the site](https://example.com/x.md) and [mail](mailto:a@example.com).\n" +
			"```sh\n[not a link](missing.md)\n```\n`[nor this](missing.md)`\n",
		"docs/guide.md": "# Guide\n\n## Why it works — twice\n\n## `code` in a heading\n\n## Guide\n\n" +
			"![plot](img/plot.png) [up](../README.md) [here](#code-in-a-heading) [again](#guide-1)\n" +
			"[root]: /pkg/file.go\n",
		"docs/img/plot.png": "png",
		"pkg/file.go":       "package pkg\n",
	})
	if out, ok := run(t, root); !ok {
		t.Fatalf("want pass, got:\n%s", out)
	}
}

// TestBadLinksFail: each kind of problem is reported with its file and line.
func TestBadLinksFail(t *testing.T) {
	root := writeTree(t, map[string]string{
		"README.md": "# Top\n[gone](docs/gone.md)\n[no heading](docs/guide.md#nowhere)\n",
		"docs/guide.md": "# Guide\n![missing image](lab/missing.png)\n[outside](../../elsewhere.md)\n" +
			"The contract is in SEMANTICS.md.\nSee ../shared/ for the rest, and ANCHORS.md.\n",
	})
	out, ok := run(t, root)
	if ok {
		t.Fatalf("want failure, got pass:\n%s", out)
	}
	for _, want := range []string{
		"README.md:2: link docs/gone.md: no such file",
		"README.md:3: link docs/guide.md#nowhere: docs/guide.md has no heading #nowhere",
		"docs/guide.md:2: link lab/missing.png: no such file",
		"docs/guide.md:3: link ../../elsewhere.md leaves the repository",
		"docs/guide.md:4:The contract is in SEMANTICS.md.: mentions a file outside the repository",
		"docs/guide.md:5:See ../shared/ for the rest, and ANCHORS.md.: mentions a file outside the repository",
		"6 problem(s)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
