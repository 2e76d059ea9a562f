package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/cli"
)

// TestDebugPort: --debug-addr (ratelimit's DEBUG_HOST and DEBUG_PORT)
// serves the metrics and Go's profiler on a port of its own, counted as the
// other ports are; the HTTP API's port does not serve the profiler.
func TestDebugPort(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "edge.yaml"), envoyConfig)
	o := serveOptions{configs: cli.StringList{dir}, httpAddr: "127.0.0.1:0", debugAddr: "127.0.0.1:0", shutdown: 5 * time.Second}
	srv, logs := startWith(t, o)
	debug := "http://" + srv.debugAddr.String()
	if code, body := get(t, debug+"/metrics"); code != 200 || !strings.Contains(body, "sluice_build_info") ||
		!strings.Contains(body, `sluice_connections_open{listener="debug"}`) {
		t.Fatalf("/metrics: %d %.300q", code, body)
	}
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/goroutine?debug=1", "/debug/pprof/cmdline", "/debug/pprof/heap?debug=1"} {
		if code, body := get(t, debug+path); code != 200 || body == "" {
			t.Fatalf("%s: %d %.200q", path, code, body)
		}
	}
	if code, _ := get(t, debug+"/debug/pprof/profile?seconds=1"); code != 200 {
		t.Fatalf("a CPU profile: %d", code)
	}
	if code, _ := get(t, "http://"+srv.httpAddr.String()+"/debug/pprof/"); code != 404 {
		t.Fatalf("the HTTP API's port serves the profiler: %d", code)
	}
	if !strings.Contains(logs.String(), "debug="+srv.debugAddr.String()) {
		t.Errorf("the start log does not name the debug port:\n%s", logs)
	}
}
