package main

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/httpapi"
	"github.com/sluicehq/sluice/internal/redistest"
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
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			code, _ := get(t, base+"/healthcheck")
			if grpcServing(t, srv) == serving && code == healthcheck {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: gRPC serving %v, /healthcheck %d after 30s; want %v and %d\n%s",
					what, grpcServing(t, srv), code, serving, healthcheck, logs)
			}
		}
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
