package service

import (
	"bytes"
	"context"
	"crypto/sha256"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/storestack"
)

// Reload loads a configuration with load and puts it in force. When load
// fails, the configuration in force stays, the error is logged and counted in
// sluice_config_reloads_total{result="failure"}, and Reload returns it.
// Counters in the store are untouched either way: a policy keeps its state as
// long as its name stays the same.
//
// A configuration from xDS (ApplyDynamic) stays merged over the files'.
func (s *Service) Reload(load func() (*config.Config, error)) error {
	s.configMu.Lock()
	defer s.configMu.Unlock()
	files, err := load()
	cfg := files
	if err == nil && s.dynamic != nil {
		cfg, err = config.Overlay(files, s.dynamic)
	}
	if err != nil {
		s.obs.Reloaded(false)
		s.log.Error("configuration rejected; the previous one stays in force", "error", err)
		return err
	}
	old := s.Config()
	if !sameStore(old.Store, cfg.Store) {
		s.log.Warn("the store section changed; it takes effect at the next restart",
			"old_url", storestack.RedactURL(old.Store.URL), "new_url", storestack.RedactURL(cfg.Store.URL))
	}
	s.files = files
	s.install(cfg)
	s.obs.Reloaded(true)
	s.log.Info("configuration reloaded", "files", cfg.Files, "policies", len(cfg.Policies), "domains", len(cfg.Domains))
	return nil
}

// sameStore compares two store sections by value: TLS and Lease are
// pointers, which every load allocates afresh, so == would call every reload
// of a file with a tls or lease section a change.
func sameStore(a, b config.Store) bool {
	ta, tb := a.TLS, b.TLS
	la, lb := a.Lease, b.Lease
	a.TLS, b.TLS, a.Lease, b.Lease = nil, nil, nil, nil
	return a == b && samePointee(ta, tb) && samePointee(la, lb)
}

// samePointee reports whether a and b are both nil or point to equal values.
func samePointee[T comparable](a, b *T) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

// reloadDebounce gathers the burst of events one save or one symlink swap
// makes into one reload.
const reloadDebounce = 100 * time.Millisecond

// Watch reloads the configuration whenever the files at paths change, until
// ctx ends. A path may be a directory: files added to it, changed in it and
// removed from it are seen (config.Expand says which files it holds).
//
// It watches directories rather than files, so it sees editors that replace
// a file and the atomic symlink swap Kubernetes does when it updates a
// mounted ConfigMap (the file's own inode never changes there; the
// directory's ..data link does). It also watches where symlinks lead: a
// config path that links to a file elsewhere is reloaded when that file
// changes, and a swapped link (envoyproxy/ratelimit's RUNTIME_ROOT is one)
// moves the watch to the new target. An event that leaves the files'
// contents as they were causes no reload.
//
// since is the files' Fingerprint taken before the configuration in force
// was loaded from them: a change made after that, before the watches are in
// place, is reloaded too. nil takes the fingerprint when Watch starts.
func (s *Service) Watch(ctx context.Context, paths []string, since []byte, load func() (*config.Config, error)) error {
	return s.watch(ctx, paths, since, load, nil)
}

// Fingerprint is a digest of the configuration files paths stand for, their
// names and contents, for Watch.
func Fingerprint(paths []string) []byte { return fingerprint(paths) }

// watch is Watch; ready, when not nil, is called once the first directories
// are watched, so that tests change files only after that.
func (s *Service) watch(ctx context.Context, paths []string, since []byte, load func() (*config.Config, error), ready func()) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	defer w.Close()
	// The fingerprint is taken before the watches are placed (or before the
	// configuration was loaded), and compared again after: a change made in
	// between has no event of its own.
	last := since
	if last == nil {
		last = fingerprint(paths)
	}
	if err := s.updateWatches(w, paths, true); err != nil {
		return err
	}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	if !bytes.Equal(fingerprint(paths), last) {
		timer.Reset(reloadDebounce)
	}
	if ready != nil {
		ready()
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			s.log.Warn("watching configuration files", "error", err)
		case _, ok := <-w.Events:
			if !ok {
				return nil
			}
			timer.Reset(reloadDebounce)
		case <-timer.C:
			// Links may point elsewhere now, and directories may have come
			// or gone: follow them before reading.
			_ = s.updateWatches(w, paths, false)
			now := fingerprint(paths)
			if bytes.Equal(now, last) {
				continue
			}
			last = now
			_ = s.Reload(load) // logged and counted by Reload
		}
	}
}

// updateWatches makes w watch exactly the directories watchDirs names for
// paths now, by their real (symlink-free) names: a watch follows an inode,
// so a directory reached through a link that was swapped must be watched
// afresh. What w watches is asked of w itself: it drops the watch of a
// directory that was deleted, and one created again at the same name must be
// watched again. At start (strict) a directory that cannot be watched is an
// error; later it is logged, and tried again at the next event.
func (s *Service) updateWatches(w *fsnotify.Watcher, paths []string, strict bool) error {
	want := map[string]bool{}
	for _, dir := range watchDirs(paths) {
		if real, err := filepath.EvalSymlinks(dir); err == nil {
			dir = real
		}
		want[dir] = true
	}
	watched := map[string]bool{}
	for _, dir := range w.WatchList() {
		if !want[dir] {
			_ = w.Remove(dir) // it may be gone already
			continue
		}
		watched[dir] = true
	}
	for dir := range want {
		if watched[dir] {
			continue
		}
		if err := w.Add(dir); err != nil {
			if strict {
				return err
			}
			s.log.Warn("cannot watch a configuration directory", "dir", dir, "error", err)
		}
	}
	return nil
}

// watchDirs lists the directories whose events may change what paths hold:
// each path's directory; the path itself when it is a directory; and, for
// every symlink on the way (the path, a link it leads to, or a directory
// above it), the directory holding the link and where the link leads.
func watchDirs(paths []string) []string {
	var dirs []string
	seen := map[string]bool{}
	add := func(d string) {
		if d = filepath.Clean(d); !seen[d] {
			seen[d] = true
			dirs = append(dirs, d)
		}
	}
	var follow func(p string, depth int)
	follow = func(p string, depth int) {
		if depth > 8 { // a loop, or a chain no one writes by hand
			return
		}
		add(filepath.Dir(p))
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			add(p)
		}
		// Every link on the way, from the path up to the root.
		for a := p; ; a = filepath.Dir(a) {
			if fi, err := os.Lstat(a); err == nil && fi.Mode()&os.ModeSymlink != 0 {
				if target, err := os.Readlink(a); err == nil {
					if !filepath.IsAbs(target) {
						target = filepath.Join(filepath.Dir(a), target)
					}
					add(filepath.Dir(a))
					follow(filepath.Join(target, strings.TrimPrefix(p, a)), depth+1)
				}
			}
			if parent := filepath.Dir(a); parent == a {
				break
			}
		}
	}
	for _, p := range paths {
		if abs, err := filepath.Abs(p); err == nil {
			p = abs
		}
		follow(p, 0)
	}
	return dirs
}

// fingerprint hashes which files paths stand for and their contents; a file
// that cannot be read hashes as its error, so that its return is seen as a
// change.
func fingerprint(paths []string) []byte {
	h := sha256.New()
	files, err := config.Expand(paths...)
	if err != nil {
		h.Write([]byte("\x00" + err.Error()))
	}
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			b = []byte("\x00" + err.Error())
		}
		h.Write([]byte(p))
		h.Write([]byte{0})
		h.Write(b)
		h.Write([]byte{0})
	}
	return h.Sum(nil)
}
