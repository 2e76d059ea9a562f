package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestLoadDirectory: a directory stands for its *.yaml and *.yml files in
// name order; other names, dot files and subdirectories are left out; a
// problem in one of them names that file and line; a directory without any
// such file is an error.
func TestLoadDirectory(t *testing.T) {
	dir := t.TempDir()
	for name, src := range map[string]string{
		"b.yml":          "domain: edge\ndescriptors:\n  - key: ip\n    rate_limit: {unit: minute, requests_per_unit: 5}\n",
		"a.yaml":         "policies:\n  - {name: p, algorithm: gcra, limit: 3, period: 1m}\n",
		"notes.txt":      "not YAML: {{{",
		".a.yaml.swp":    "not YAML: {{{",
		"README.md":      "# hello",
		"sub/x.yaml":     "not YAML: {{{",
		"dir.yaml/y.yml": "not YAML: {{{",
	} {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yml")}
	if !slices.Equal(cfg.Files, want) || cfg.Policy("p") == nil || cfg.Domains["edge"] == nil {
		t.Fatalf("Files %v policies %v domains %v", cfg.Files, cfg.Policies, cfg.Domains)
	}
	if files, err := Expand(dir); err != nil || !slices.Equal(files, want) {
		t.Errorf("Expand = %v, %v", files, err)
	}

	// A directory and a file in it given together: the file is given twice.
	if _, err := Load(dir, filepath.Join(dir, "a.yaml")); err == nil || !strings.Contains(err.Error(), "given twice") {
		t.Errorf("dir plus its file: %v", err)
	}

	if err := os.WriteFile(filepath.Join(dir, "c.yaml"), []byte("policies:\n  - {name: p2, algorithm: gcra, limit: 0, period: 1m}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Load(dir)
	if err == nil || !strings.HasPrefix(err.Error(), filepath.Join(dir, "c.yaml")+":2:") {
		t.Errorf("a bad file in the directory: %v", err)
	}

	empty := t.TempDir()
	_, err = Load(empty)
	if err == nil || !strings.Contains(err.Error(), empty+": the directory holds no *.yaml or *.yml file") {
		t.Errorf("empty directory: %v", err)
	}
	if _, err := Expand(empty); err == nil {
		t.Error("Expand of an empty directory: no error")
	}
}

// TestTabIndentation: a tab used to indent says so and how to fix it.
func TestTabIndentation(t *testing.T) {
	for src, line := range map[string]string{
		"policies:\n\t- name: p\n":                      "2",
		"policies:\n  - name: p\n\t  algorithm: gcra\n": "3",
		"store:\n  \turl: memory://\n":                  "2",
	} {
		_, err := Parse("tabs.yaml", []byte(src))
		if err == nil || !strings.Contains(err.Error(), "indent with spaces") || !strings.HasPrefix(err.Error(), "tabs.yaml:"+line+":") {
			t.Errorf("%q: %v", src, err)
		}
	}
	// A tab after a value is not indentation, and YAML allows it.
	if _, err := Parse("ok.yaml", []byte("policies:\n  - {name: p, algorithm: gcra, limit: 1, period: 1m}\t\n")); err != nil {
		t.Errorf("a tab after a value: %v", err)
	}
}
