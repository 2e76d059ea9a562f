package storestack

import (
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/redistest"
)

// lineWriter hands each line a log handler writes to a channel.
type lineWriter chan string

func (w lineWriter) Write(p []byte) (int, error) {
	w <- string(p)
	return len(p), nil
}

// modeLine opens a store on storeURL and returns the line it logs about its
// mode.
func modeLine(t *testing.T, storeURL string) string {
	t.Helper()
	lines := make(lineWriter, 16)
	st, err := Open(config.Store{URL: storeURL}, WithLogger(slog.New(slog.NewTextHandler(lines, nil))))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	timeout := time.After(30 * time.Second) // generous: the line comes once Redis answers
	for {
		select {
		case line := <-lines:
			if strings.Contains(line, "redis store mode") {
				return line
			}
		case <-timeout:
			t.Fatal("no mode logged within 30s of opening the store")
		}
	}
}

// TestOpenStoreLogsMode: opening a Redis store logs one line saying how it
// runs its Lua and why — functions on Redis 7, scripts for a user whose ACL
// refuses FUNCTION, with the server's answer.
func TestOpenStoreLogsMode(t *testing.T) {
	srv := redistest.Start(t)
	line := modeLine(t, srv.URL())
	if !strings.Contains(line, "mode=functions") || !strings.Contains(line, "loaded the function library") {
		t.Errorf("log line %q; want mode=functions and its reason", line)
	}
	if _, err := srv.Do("ACL", "SETUSER", "nofn", "on", ">pw", "~*", "&*", "+@all", "-function"); err != nil {
		t.Fatal(err)
	}
	u := url.URL{Scheme: "redis", Host: srv.Addr(), User: url.UserPassword("nofn", "pw")}
	line = modeLine(t, u.String())
	if !strings.Contains(line, "mode=scripts") || !strings.Contains(line, "NOPERM") {
		t.Errorf("log line %q; want mode=scripts and the server's NOPERM", line)
	}
}

// TestOpenStoreModeLogStops: closing a store whose Redis never answered ends
// the mode log's retries, with nothing logged.
func TestOpenStoreModeLogStops(t *testing.T) {
	lines := make(lineWriter, 16)
	st, err := Open(config.Store{URL: "redis://127.0.0.1:1"}, WithLogger(slog.New(slog.NewTextHandler(lines, nil))))
	if err != nil {
		t.Fatal(err)
	}
	st.Close() // returns only once the mode log has stopped
	close(lines)
	for line := range lines {
		if strings.Contains(line, "redis store mode") {
			t.Errorf("mode logged with Redis unreachable: %q", line)
		}
	}
}
