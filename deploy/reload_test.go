package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/testwait"
)

// kubeletDir lays out a ConfigMap volume as the kubelet does: the files live
// in a timestamped directory, ..data points at it, and each file name is a
// symbolic link through ..data. An update writes a new directory and swaps
// ..data in one rename.
type kubeletDir struct {
	t       *testing.T
	dir     string
	current string
	n       int
}

func newKubeletDir(t *testing.T, files map[string]string) *kubeletDir {
	k := &kubeletDir{t: t, dir: t.TempDir()}
	k.update(files)
	for name := range files {
		if err := os.Symlink(filepath.Join("..data", name), filepath.Join(k.dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return k
}

// update writes files to a new timestamped directory, points ..data at it
// atomically and removes the old one, as the kubelet's atomic writer does.
func (k *kubeletDir) update(files map[string]string) {
	k.n++
	ts := fmt.Sprintf("..2026_11_23_00_00_%02d.%09d", k.n, k.n)
	if err := os.Mkdir(filepath.Join(k.dir, ts), 0o755); err != nil {
		k.t.Fatal(err)
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(k.dir, ts, name), []byte(text), 0o644); err != nil {
			k.t.Fatal(err)
		}
	}
	tmp := filepath.Join(k.dir, "..data_tmp")
	if err := os.Symlink(ts, tmp); err != nil {
		k.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(k.dir, "..data")); err != nil {
		k.t.Fatal(err)
	}
	if k.current != "" {
		if err := os.RemoveAll(filepath.Join(k.dir, k.current)); err != nil {
			k.t.Fatal(err)
		}
	}
	k.current = ts
}

// TestConfigMapUpdateReloads renders the chart's ConfigMap into a kubelet-style
// volume, starts sluice serve on it as the Deployment does, renders it again
// with one more policy (what helm upgrade would apply), swaps it in and waits
// for the new policy to be served.
func TestConfigMapUpdateReloads(t *testing.T) {
	render := func(extraValues string) configFile {
		args := []string{"template", "rel", chart}
		if extraValues != "" {
			values := filepath.Join(t.TempDir(), "values.yaml")
			if err := os.WriteFile(values, []byte(extraValues), 0o644); err != nil {
				t.Fatal(err)
			}
			args = append(args, "-f", values)
		}
		var o objects
		if err := decodeObjects([]byte(helm(t, args...)), &o); err != nil {
			t.Fatal(err)
		}
		files := checkSluiceObjects(t, &o)
		if len(files) != 1 {
			t.Fatalf("want one configuration file, got %v", files)
		}
		validateConfig(t, "rendered", files)
		return files[0]
	}
	before := render("")
	after := render(`policies:
  - {name: api_per_key, algorithm: gcra, limit: 100, period: 1m, burst: 20}
  - {name: added_by_update, algorithm: fixed_window, limit: 3, period: 1m}
`)
	files := []configFile{before}

	vol := newKubeletDir(t, map[string]string{before.name: before.text})
	// memory:// stands in for the chart's Redis URL: the reload does not
	// depend on the store.
	base := startServe(t, "--config", filepath.Join(vol.dir, files[0].name), "--store", "memory://")
	if status, body := httpGet(t, base+"/v1/policies"); status != 200 || strings.Contains(body, "added_by_update") {
		t.Fatalf("GET /v1/policies before the update: %d %s", status, body)
	}

	vol.update(map[string]string{after.name: after.text})
	testwait.UntilSaw(t, "the ConfigMap update reloaded", func() (bool, string) {
		_, body := httpGet(t, base+"/v1/policies")
		return strings.Contains(body, "added_by_update"), "/v1/policies: " + body
	})
	// The new policy decides: 3 per minute, then denied.
	for i := range 3 {
		if got := check(t, base, "added_by_update", "k"); got != 200 {
			t.Fatalf("check %d: status %d, want 200", i+1, got)
		}
	}
	if got := check(t, base, "added_by_update", "k"); got != 429 {
		t.Fatalf("check 4: status %d, want 429", got)
	}
}
