package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestCharge: sluice charge records usage beyond the limit against a
// running serve: the key then owes the excess, and sluice check is denied;
// a charge that fits says what is left; a missing cost or an unknown policy
// is an error (exit 2).
func TestCharge(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	writeFile(t, path, `policies:
  - {name: tokens, algorithm: fixed_window, limit: 10, period: 8760h}
`)
	server := startCheckServer(t, path)
	run := func(args ...string) (int, string) {
		code, out, errOut := runCmd(append(args, "--server", server)...)
		return code, out + errOut
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"charge", "--policy", "tokens", "--key", "k", "--cost", "4"}, 0, `charged 4: policy tokens, key "k": 6 of 10 left`},
		{[]string{"charge", "--policy", "tokens", "--key", "k", "--cost", "11"}, 0, `charged 11: policy tokens, key "k": owes 5 (limit 10); a request of cost 1 is denied for`},
		{[]string{"check", "--policy", "tokens", "--key", "k"}, 1, `denied: policy tokens, key "k"`},
		{[]string{"check", "--policy", "tokens", "--key", "k", "--cost", "0"}, 0, `a request of cost 1 would be denied now`},
		{[]string{"charge", "--policy", "tokens", "--key", "k"}, 2, "--cost is required"},
		{[]string{"charge", "--policy", "nope", "--key", "k", "--cost", "1"}, 2, `charge: policy: no policy named "nope"`},
		{[]string{"charge", "--policy", "tokens", "--key", "other", "--cost", "0"}, 0, "10 of 10 left"},
	} {
		code, out := run(c.args...)
		if code != c.code || !strings.Contains(out, c.want) {
			t.Errorf("%v: exit %d %q; want %d and %q", c.args, code, out, c.code, c.want)
		}
	}
}
