package observe

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/failover"
)

// TestStoreErrorLogRateLimited: failed store calls are logged at most once a
// second, each line saying how many were left out, in every fail mode.
func TestStoreErrorLogRateLimited(t *testing.T) {
	for _, mode := range []failover.Mode{failover.FailOpen, failover.FailClosed, failover.FailLocal} {
		t.Run(mode.String(), func(t *testing.T) {
			logs := &bytes.Buffer{}
			log := slog.New(slog.NewTextHandler(logs, nil))
			var l errorLog
			start := time.Unix(1_700_000_000, 0)
			down := errors.New("OOM command not allowed when used memory > 'maxmemory'")
			for i := range 250 { // 2.5 s of failures, one every 10 ms
				l.log(log, start.Add(time.Duration(i)*10*time.Millisecond), down, storeCause(down), mode.String())
			}
			out := logs.String()
			if n := strings.Count(out, "store call failed"); n != 3 {
				t.Fatalf("%d log lines for 2.5 s of failures, want 3:\n%s", n, out)
			}
			if !strings.Contains(out, "suppressed=99") || !strings.Contains(out, "on_error="+mode.String()) || !strings.Contains(out, "OOM command") {
				t.Fatalf("log lines lack the count left out, the mode or the cause:\n%s", out)
			}
		})
	}
}
