package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/testwait"
)

// TestServeConfigDirectory: serve --config DIR serves every file of the
// directory and, without a SIGHUP, takes in a file added later and drops a
// file removed. The time from the write to the first answer that shows it is
// logged (measured, not asserted: the machine may be loaded).
func TestServeConfigDirectory(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "edge.yaml"), envoyConfig)
	logs := &syncBuffer{}
	log, _ := newLogger(logs, "text", "info")
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := startServer(ctx, serveOptions{configs: cli.StringList{dir}, httpAddr: "127.0.0.1:0", shutdown: 5 * time.Second}, log)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); srv.wait() })
	base := "http://" + srv.httpAddr.String()
	check := func() int {
		status, _ := postJSON(t, base+"/v1/check", `{"policy":"api_per_key","key":"dir","cost":0}`)
		return status
	}
	if status := check(); status != 404 {
		t.Fatalf("before the file is added: %d", status)
	}
	waitFor := func(what string, want int) time.Duration {
		start := time.Now()
		testwait.UntilSaw(t, what, func() (bool, string) { return check() == want, "\n" + logs.String() })
		return time.Since(start)
	}
	writeFile(t, filepath.Join(dir, "api.yaml"), nativeConfig)
	added := waitFor("the added file's policy is served", 200)
	if err := os.Remove(filepath.Join(dir, "api.yaml")); err != nil {
		t.Fatal(err)
	}
	removed := waitFor("the removed file's policy is gone", 404)
	t.Logf("file added: in force after %v; removed: gone after %v", added, removed)
	if !strings.Contains(logs.String(), "configuration reloaded") {
		t.Errorf("no reload logged:\n%s", logs)
	}
}
