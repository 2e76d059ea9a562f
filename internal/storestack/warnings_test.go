package storestack

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/config"
)

// TestStoreWarnings: the local fail policy (set or by default) on Redis
// without store.nodes is warned about, at OpenStore in the log and by
// StoreWarnings for validate; nodes set, another fail policy or the memory
// store are not.
func TestWarnings(t *testing.T) {
	const redis = "redis://127.0.0.1:1"
	for _, tc := range []struct {
		st   config.Store
		warn bool
	}{
		{config.Store{URL: redis}, true},
		{config.Store{URL: redis, OnError: "local"}, true},
		{config.Store{URL: "rediss://127.0.0.1:1"}, true},
		{config.Store{URL: redis, Nodes: 1}, false},
		{config.Store{URL: redis, Nodes: 4}, false},
		{config.Store{URL: redis, OnError: "closed"}, false},
		{config.Store{URL: redis, OnError: "open"}, false},
		{config.Store{URL: "memory://"}, false},
		{config.Store{}, false},
	} {
		got := Warnings(tc.st)
		if (len(got) > 0) != tc.warn || (tc.warn && !strings.Contains(got[0], "store.nodes is not set")) {
			t.Errorf("%+v: %q, want a warning: %v", tc.st, got, tc.warn)
		}
		var logged bytes.Buffer
		st, err := Open(tc.st, WithLogger(slog.New(slog.NewTextHandler(&logged, nil))))
		if err != nil {
			t.Fatalf("%+v: %v", tc.st, err)
		}
		st.Close()
		if strings.Contains(logged.String(), "store.nodes is not set") != tc.warn {
			t.Errorf("%+v: OpenStore logged %q, want the warning: %v", tc.st, logged.String(), tc.warn)
		}
	}
}
