package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/service"
)

// watchConfig keeps svc's configuration current, as serve and proxy do:
// the files at paths are reloaded with load when they change (since is
// their fingerprint taken before the configuration in force was loaded)
// and on SIGHUP, until ctx ends; wg waits for it.
func watchConfig(ctx context.Context, wg *sync.WaitGroup, svc *service.Service, paths []string, since []byte,
	load func() (*config.Config, error), log *slog.Logger) {
	if len(paths) > 0 {
		wg.Go(func() {
			if err := svc.Watch(ctx, paths, since, load); err != nil {
				log.Warn("not watching the configuration files; reload with SIGHUP", "error", err)
			}
		})
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	wg.Go(func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				log.Info("SIGHUP: reloading the configuration")
				_ = svc.Reload(load) // logged and counted
			}
		}
	})
}
