package redisstore_test

import (
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/redisstore/internal/rstest"
	"github.com/sluicehq/sluice/storetest"
)

// TestReserver checks reserve.lua and the refunds against the pure core on a
// real redis-server.
func TestReserver(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, srv.URL())
	storetest.RunReserver(t, func(t *testing.T, clock sluice.Clock) storetest.Harness {
		opts := append(rstest.Defaults(), redisstore.WithClock(clock))
		return storetest.Harness{Store: redisstore.New(c, opts...)}
	})
}
