package service

import (
	"bytes"
	"context"
	"crypto/sha256"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/sluicehq/sluice/config"
)

// Reload loads a configuration with load and puts it in force. When load
// fails, the configuration in force stays, the error is logged and counted in
// sluice_config_reloads_total{result="failure"}, and Reload returns it.
// Counters in the store are untouched either way: a policy keeps its state as
// long as its name stays the same.
func (s *Service) Reload(load func() (*config.Config, error)) error {
	cfg, err := load()
	if err != nil {
		s.metrics.reloads.WithLabelValues("failure").Inc()
		s.log.Error("configuration rejected; the previous one stays in force", "error", err)
		return err
	}
	old := s.Config()
	if !sameStore(old.Store, cfg.Store) {
		s.log.Warn("the store section changed; it takes effect at the next restart",
			"old_url", RedactURL(old.Store.URL), "new_url", RedactURL(cfg.Store.URL))
	}
	s.install(cfg)
	s.metrics.reloads.WithLabelValues("success").Inc()
	s.log.Info("configuration reloaded", "files", cfg.Files, "policies", len(cfg.Policies), "domains", len(cfg.Domains))
	return nil
}

// sameStore compares two store sections by value: TLS is a pointer, which
// every load allocates afresh, so == would call every reload of a file with a
// tls section a change.
func sameStore(a, b config.Store) bool {
	ta, tb := a.TLS, b.TLS
	a.TLS, b.TLS = nil, nil
	return a == b && (ta == nil) == (tb == nil) && (ta == nil || *ta == *tb)
}

// reloadDebounce gathers the burst of events one save or one symlink swap
// makes into one reload.
const reloadDebounce = 100 * time.Millisecond

// Watch reloads the configuration whenever the files at paths change, until
// ctx ends. It watches the files' directories rather than the files, so it
// sees editors that replace a file and the atomic symlink swap Kubernetes
// does when it updates a mounted ConfigMap (the file's own inode never
// changes there; the directory's ..data link does). An event that leaves the
// files' contents as they were causes no reload.
func (s *Service) Watch(ctx context.Context, paths []string, load func() (*config.Config, error)) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	defer w.Close()
	dirs := map[string]bool{}
	for _, p := range paths {
		dir := filepath.Dir(p)
		if !dirs[dir] {
			dirs[dir] = true
			if err := w.Add(dir); err != nil {
				return err
			}
		}
	}
	last := fingerprint(paths)
	if s.watching != nil {
		s.watching()
	}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
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
			now := fingerprint(paths)
			if bytes.Equal(now, last) {
				continue
			}
			last = now
			_ = s.Reload(load) // logged and counted by Reload
		}
	}
}

// fingerprint hashes the files' contents; a file that cannot be read hashes
// as its error, so that its return is seen as a change.
func fingerprint(paths []string) []byte {
	h := sha256.New()
	for _, p := range paths {
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
