package service

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/testwait"
)

// watchReady runs s.watch until the test ends and returns once the watches
// are in place, so that the test's changes cannot precede them.
func watchReady(t *testing.T, s *Service, paths []string, load func() (*config.Config, error)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- s.watch(ctx, paths, nil, load, func() { close(ready) }) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Watch: %v", err)
		}
	})
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("Watch ended before watching: %v", err)
	}
}

func limitOf(s *Service, policy string) int64 {
	if p := s.Config().Policy(policy); p != nil {
		return p.Limit
	}
	return -1
}

// TestWatchSymlinkToFileElsewhere: the config path is a symlink to a file in
// another directory; editing that file — in place, or by an editor's
// write-and-rename — reloads, with no SIGHUP.
func TestWatchSymlinkToFileElsewhere(t *testing.T) {
	root := t.TempDir()
	confDir, realDir := filepath.Join(root, "etc"), filepath.Join(root, "srv", "conf")
	must(t, os.MkdirAll(confDir, 0o755))
	must(t, os.MkdirAll(realDir, 0o755))
	target := filepath.Join(realDir, "limits.yaml")
	write(t, target, policyFile(3))
	path := filepath.Join(confDir, "sluice.yaml")
	must(t, os.Symlink(target, path))
	s, load := newTestService(t, path)
	watchReady(t, s, []string{path}, load)

	write(t, target, policyFile(5))
	testwait.Until(t, "the edit of the link's target is in force", func() bool { return limitOf(s, "p") == 5 })

	tmp := filepath.Join(realDir, ".limits.yaml.swp")
	write(t, tmp, policyFile(8))
	must(t, os.Rename(tmp, target))
	testwait.Until(t, "the replaced target is in force", func() bool { return limitOf(s, "p") == 8 })

	// Pointing the link at another file elsewhere moves the watch there too.
	other := filepath.Join(root, "other", "limits.yaml")
	must(t, os.MkdirAll(filepath.Dir(other), 0o755))
	write(t, other, policyFile(11))
	must(t, os.Symlink(other, path+".new"))
	must(t, os.Rename(path+".new", path))
	testwait.Until(t, "the relinked file is in force", func() bool { return limitOf(s, "p") == 11 })
	write(t, other, policyFile(12))
	testwait.Until(t, "an edit of the new target is in force", func() bool { return limitOf(s, "p") == 12 })
}

// TestWatchDirectory: a directory path stands for its *.yaml and *.yml
// files; a file added, changed or removed is seen on reload.
func TestWatchDirectory(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.yaml"), policyFile(3))
	s, load := newTestService(t, dir)
	watchReady(t, s, []string{dir}, load)

	write(t, filepath.Join(dir, "b.yml"), "policies:\n  - {name: q, algorithm: gcra, limit: 4, period: 1m}\n")
	testwait.Until(t, "the added file is in force", func() bool { return limitOf(s, "q") == 4 })
	if got := s.Config().Files; !slices.Equal(got, []string{filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yml")}) {
		t.Errorf("Files = %v", got)
	}
	write(t, filepath.Join(dir, "a.yaml"), policyFile(6))
	testwait.Until(t, "the changed file is in force", func() bool { return limitOf(s, "p") == 6 })
	must(t, os.Remove(filepath.Join(dir, "a.yaml")))
	testwait.Until(t, "the removed file's policy is gone", func() bool { return limitOf(s, "p") == -1 && limitOf(s, "q") == 4 })
}

// TestWatchSwappedRootLink: envoyproxy/ratelimit's runtime layout, where
// RUNTIME_ROOT is a link swapped to a new tree on each deploy and the
// configuration directory lies below it. The swap reloads.
func TestWatchSwappedRootLink(t *testing.T) {
	base := t.TempDir()
	mkTree := func(name string, limit int) {
		d := filepath.Join(base, name, "ratelimit", "config")
		must(t, os.MkdirAll(d, 0o755))
		write(t, filepath.Join(d, "limits.yaml"), policyFile(limit))
	}
	mkTree("v1", 3)
	current := filepath.Join(base, "current")
	must(t, os.Symlink(filepath.Join(base, "v1"), current))
	dir := filepath.Join(current, "ratelimit", "config")
	s, load := newTestService(t, dir)
	watchReady(t, s, []string{dir}, load)

	mkTree("v2", 9)
	must(t, os.Symlink(filepath.Join(base, "v2"), current+".tmp"))
	must(t, os.Rename(current+".tmp", current))
	testwait.Until(t, "the swapped tree is in force", func() bool { return limitOf(s, "p") == 9 })
	// The watch moved with the link: an edit in the new tree is seen.
	write(t, filepath.Join(base, "v2", "ratelimit", "config", "limits.yaml"), policyFile(10))
	testwait.Until(t, "an edit in the new tree is in force", func() bool { return limitOf(s, "p") == 10 })
}

// TestWatchDirectoryRecreated: the configuration directory is deleted and
// made again (as a deploy tool may do); its new files are seen.
func TestWatchDirectoryRecreated(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "conf")
	must(t, os.Mkdir(dir, 0o755))
	write(t, filepath.Join(dir, "a.yaml"), policyFile(3))
	s, load := newTestService(t, dir)
	watchReady(t, s, []string{dir}, load)

	must(t, os.RemoveAll(dir))
	testwait.Until(t, "the missing directory is a rejected reload", func() bool { return metric(t, s, "sluice_config_reloads_total", "result", "failure") >= 1 })
	must(t, os.Mkdir(dir, 0o755))
	write(t, filepath.Join(dir, "a.yaml"), policyFile(4))
	testwait.Until(t, "the recreated directory is in force", func() bool { return limitOf(s, "p") == 4 })
	write(t, filepath.Join(dir, "a.yaml"), policyFile(5))
	testwait.Until(t, "an edit in the recreated directory is in force", func() bool { return limitOf(s, "p") == 5 })
}

// TestWatchSeesAChangeBeforeItStarts: a file changed after the configuration
// in force was loaded but before Watch has placed its watches has no event of
// its own; with the fingerprint taken before the load, Watch reloads it.
func TestWatchSeesAChangeBeforeItStarts(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sluice.yaml")
	write(t, path, policyFile(3))
	since := Fingerprint([]string{path})
	s, load := newTestService(t, path)
	write(t, path, policyFile(7)) // while the server is still starting
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Watch(ctx, []string{path}, since, load) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Watch: %v", err)
		}
	})
	testwait.Until(t, "the change made before Watch started is in force", func() bool { return limitOf(s, "p") == 7 })
}
