package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/cli"
)

// Exit statuses of sluice check.
const (
	exitAllowed = 0
	exitDenied  = 1
	exitError   = 2
)

func runCheck(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("sluice check", "sluice check [--server URL] --policy NAME --key KEY [--cost N] [--plan PLAN]",
		"Check asks a running service (its HTTP API) whether a request is allowed, and\nprints the decision. Exit status: 0 allowed, 1 denied, 2 error.\nA cost of 0 only looks (a peek): it prints what is left, consumes nothing and\nexits 0; \"a request of cost 1 would be denied\" means the key is used up.", stderr)
	server := fs.String("server", "http://127.0.0.1:8080", "the service's HTTP `URL`; host:port means http://host:port")
	policy := fs.String("policy", "", "the policy `name` (GET /v1/policies lists them)")
	key := fs.String("key", "", "the `key` to limit, e.g. a user or API key")
	cost := fs.Int64("cost", 1, "the units the request costs")
	plan := fs.String("plan", "", "the key's `plan`, for a policy with plans (none or an unknown one: the default plan)")
	timeout := fs.Duration("timeout", 5*time.Second, "give up after this long")
	if code := cli.ParseFlags(fs, args); code >= 0 {
		return code // 0 after --help, 2 (exitError) for a usage error
	}
	if *policy == "" || *key == "" {
		return cli.UsageError(fs, "--policy and --key are required")
	}
	base, err := serverURL(*server)
	if err != nil {
		return cli.UsageError(fs, err.Error())
	}
	*server = base
	fields := map[string]any{"policy": *policy, "key": *key, "cost": *cost}
	if *plan != "" {
		fields["plan"] = *plan
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	var out struct {
		Allowed bool `json:"allowed"`
		Checks  []struct {
			Policy       string `json:"policy"`
			Key          string `json:"key"`
			Limit        int64  `json:"limit"`
			Remaining    int64  `json:"remaining"`
			RetryAfterMS int64  `json:"retry_after_ms"`
			ResetAfterMS int64  `json:"reset_after_ms"`
			DelayMS      int64  `json:"delay_ms"`
			Shadow       bool   `json:"shadow"`
			Allowed      bool   `json:"allowed"`
			ReleaseToken string `json:"release_token"`
		} `json:"checks"`
		Error *apiErrorReply `json:"error"`
	}
	resp, err := postAPI(ctx, *server, "/v1/check", fields, &out)
	if err != nil {
		fmt.Fprintln(stderr, "check:", err)
		return exitError
	}
	if out.Error != nil || (resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusTooManyRequests) || len(out.Checks) != 1 {
		fmt.Fprintf(stderr, "check: %s\n", apiMessage(resp, out.Error))
		return exitError
	}
	c := out.Checks[0]
	ms := func(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
	if *cost == 0 {
		// A peek is always "allowed" and consumes nothing: what it reports
		// is the state, so say that rather than "allowed".
		fmt.Fprintf(stdout, "peek: policy %s, key %q: %d of %d left", c.Policy, c.Key, c.Remaining, c.Limit)
		if c.Remaining == 0 {
			fmt.Fprint(stdout, ", a request of cost 1 would be denied now")
		} else {
			fmt.Fprintf(stdout, ", a request of cost up to %d would be allowed now", c.Remaining)
		}
		fmt.Fprintf(stdout, "; full again in %v\n", ms(c.ResetAfterMS))
		return exitAllowed
	}
	if out.Allowed {
		fmt.Fprintf(stdout, "allowed: policy %s, key %q: %d of %d left, full again in %v", c.Policy, c.Key, c.Remaining, c.Limit, ms(c.ResetAfterMS))
		if c.DelayMS > 0 {
			fmt.Fprintf(stdout, "; proceed after %v (leaky bucket queue)", ms(c.DelayMS))
		}
		if c.Shadow && !c.Allowed {
			fmt.Fprint(stdout, " (shadow policy: it would have denied)")
		}
		if c.ReleaseToken != "" {
			fmt.Fprintf(stdout, "; holds an in-flight slot: sluice release --policy %s --key %q --token %s", c.Policy, c.Key, c.ReleaseToken)
		}
		fmt.Fprintln(stdout)
		return exitAllowed
	}
	fmt.Fprintf(stdout, "denied: policy %s, key %q: %d of %d left; retry in %v\n", c.Policy, c.Key, c.Remaining, c.Limit, ms(c.RetryAfterMS))
	return exitDenied
}

// unreachable explains a check that got no HTTP answer from server: what was
// tried and how to point check at a running service.
func unreachable(server, path string, err error) string {
	what := err.Error()
	if ue, ok := errors.AsType[*url.Error](err); ok {
		what = ue.Err.Error()
	}
	return fmt.Sprintf("no answer from the service at %s (POST %s): %s\n"+
		"  Is `sluice serve` running? It listens on --http-addr (default :8080); give that address with\n"+
		"  --server host:port (default http://127.0.0.1:8080).", server, path, what)
}

// serverURL is the service's base URL from --server: http:// is added to a
// bare host:port, since that is what people type; another scheme is refused
// rather than sent somewhere unexpected.
func serverURL(raw string) (string, error) {
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("--server %q: want a URL such as http://127.0.0.1:8080 or host:port", raw)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("--server %q: the service's HTTP API is http:// or https:// (the gRPC port speaks only Envoy's API)", raw)
	}
	return strings.TrimRight(raw, "/"), nil
}
