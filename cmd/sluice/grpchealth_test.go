package main

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/httpapi"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/testwait"
)

// TestGRPCHealthFollowsStore: with --healthcheck-store (ratelimit's
// REDIS_HEALTH_CHECK_ACTIVE_CONNECTION) gRPC health follows /healthcheck:
// NOT_SERVING, and /healthcheck 500, while Redis is gone, SERVING and 200
// once it is back. /readyz stays 200: the fail policy still answers.
func TestGRPCHealthFollowsStore(t *testing.T) {
	redis := redistest.Start(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "edge.yaml"), envoyConfig)
	o := serveOptions{configs: cli.StringList{dir}, storeURL: redis.URL(), httpAddr: "127.0.0.1:0", grpcAddr: "127.0.0.1:0",
		shutdown: 5 * time.Second, rl: ratelimitOptions{health: httpapi.Healthcheck{Store: true}}}
	srv, logs := startWith(t, o)
	base := "http://" + srv.httpAddr.String()
	await := func(what string, serving bool, healthcheck int) {
		t.Helper()
		testwait.UntilSaw(t, fmt.Sprintf("%s: gRPC serving %v and /healthcheck %d", what, serving, healthcheck), func() (bool, string) {
			code, _ := get(t, base+"/healthcheck")
			got := grpcServing(t, srv)
			return got == serving && code == healthcheck, fmt.Sprintf("gRPC serving %v, /healthcheck %d\n%s", got, code, logs)
		})
	}
	await("Redis up", true, 200)
	redis.Kill()
	await("Redis gone", false, 500)
	if code, body := readyz(t, srv); code != 200 {
		t.Fatalf("/readyz with Redis gone: %d %s", code, body)
	}
	redis.Restart()
	await("Redis back", true, 200)
}
