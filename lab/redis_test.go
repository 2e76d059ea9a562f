package lab

import (
	"testing"

	"github.com/sluicehq/sluice/internal/redistest"
)

// TestRedis runs the scenarios against a real redis-server: Sluice's Redis
// store (virtual time through WithClock where the scenario is in virtual
// time, server time for race and skew) and real GET/SET/INCRBY for the naive
// variants.
func TestRedis(t *testing.T) {
	url := redistest.Start(t).URL()
	t.Run("boundary", func(t *testing.T) { checkBoundary(t, url) })
	t.Run("nodes", func(t *testing.T) { checkNodes(t, url) })
	t.Run("race", func(t *testing.T) { checkRace(t, url) })
	t.Run("stale-cache", func(t *testing.T) { checkStaleCache(t, url) })
	// Real time: 200ms windows, three bursts, about 1.5 s. A small limit
	// keeps each burst well inside the skew interval even under -race.
	t.Run("skew", func(t *testing.T) { checkSkew(t, url, Options{Limit: 20}) })
	t.Run("accuracy", func(t *testing.T) { checkAccuracy(t, url, Options{Sources: 300, Windows: 2}) })
}
