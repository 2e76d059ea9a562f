package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
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
	kf := addKeyFlags(fs)
	cost := fs.Int64("cost", 1, "the units the request costs")
	if code := kf.parse(fs, args); code >= 0 {
		return code
	}
	server, timeout := &kf.server, &kf.timeout
	fields := kf.fields(*cost)
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
		} `json:"checks"`
	}
	if !postAPI(ctx, *timeout, *server, "/v1/check", fields, http.StatusTooManyRequests, &out, stderr) {
		return exitError
	}
	if len(out.Checks) != 1 {
		fmt.Fprintf(stderr, "check: %d checks in the answer, want 1\n", len(out.Checks))
		return exitError
	}
	c := out.Checks[0]
	ms := func(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
	if *cost == 0 {
		// A peek consumes nothing, and the API denies it once nothing is
		// left: what it reports is the state, so say that rather than
		// "allowed" or "denied".
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
		fmt.Fprintln(stdout)
		return exitAllowed
	}
	fmt.Fprintf(stdout, "denied: policy %s, key %q: %d of %d left; retry in %v\n", c.Policy, c.Key, c.Remaining, c.Limit, ms(c.RetryAfterMS))
	return exitDenied
}

// keyFlags are the flags of a command asking the HTTP API about one key:
// sluice check and sluice charge.
type keyFlags struct {
	server, policy, key, plan string
	timeout                   time.Duration
}

func addKeyFlags(fs *flag.FlagSet) *keyFlags {
	kf := &keyFlags{}
	fs.StringVar(&kf.server, "server", "http://127.0.0.1:8080", "the service's HTTP `URL`; host:port means http://host:port")
	fs.StringVar(&kf.policy, "policy", "", "the policy `name` (GET /v1/policies lists them)")
	fs.StringVar(&kf.key, "key", "", "the `key` to limit, e.g. a user or API key")
	fs.StringVar(&kf.plan, "plan", "", "the key's `plan`, for a policy with plans (none or an unknown one: the default plan)")
	fs.DurationVar(&kf.timeout, "timeout", 5*time.Second, "give up after this long")
	return kf
}

// parse parses args into fs and checks the flags: -1 when the command goes
// on, else its exit status (0 after --help, 2 for a usage error).
func (kf *keyFlags) parse(fs *flag.FlagSet, args []string) int {
	if code := cli.ParseFlags(fs, args); code >= 0 {
		return code
	}
	if kf.policy == "" || kf.key == "" {
		return cli.UsageError(fs, "--policy and --key are required")
	}
	base, err := serverURL(kf.server)
	if err != nil {
		return cli.UsageError(fs, err.Error())
	}
	kf.server = base
	return -1
}

// fields is the JSON body of a check or charge of cost.
func (kf *keyFlags) fields(cost int64) map[string]any {
	fields := map[string]any{"policy": kf.policy, "key": kf.key, "cost": cost}
	if kf.plan != "" {
		fields["plan"] = kf.plan
	}
	return fields
}

// postAPI posts fields as JSON to the service's path and decodes its JSON
// answer into out. An answer of 200 (or also status, when not 0) is one;
// any other, an error body, or no answer is said on stderr, and postAPI
// returns false.
func postAPI(ctx context.Context, timeout time.Duration, server, path string, fields map[string]any, status int, out any, stderr io.Writer) bool {
	cmd := strings.TrimPrefix(path, "/v1/")
	body, _ := json.Marshal(fields)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, server+path, bytes.NewReader(body))
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", cmd, err)
		return false
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprint(stderr, unreachable(cmd, server, path, err))
		return false
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var apiErr struct {
		Error *struct{ Code, Message, Field string } `json:"error"`
	}
	if err == nil {
		err = json.Unmarshal(raw, &apiErr)
	}
	if err == nil {
		err = json.Unmarshal(raw, out)
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: %s answered %s with a body that is not the API's JSON: %v\n", cmd, server, resp.Status, err)
		return false
	}
	if apiErr.Error != nil || resp.StatusCode != http.StatusOK && (status == 0 || resp.StatusCode != status) {
		msg := resp.Status
		if e := apiErr.Error; e != nil {
			msg = e.Message
			if e.Field != "" {
				msg = e.Field + ": " + msg
			}
		}
		fmt.Fprintf(stderr, "%s: %s\n", cmd, msg)
		return false
	}
	return true
}

// unreachable explains a command that got no HTTP answer from server: what
// was tried and how to point the command at a running service.
func unreachable(cmd, server, path string, err error) string {
	what := err.Error()
	if ue, ok := errors.AsType[*url.Error](err); ok {
		what = ue.Err.Error()
	}
	return fmt.Sprintf("%s: no answer from the service at %s (POST %s): %s\n"+
		"  Is `sluice serve` running? It listens on --http-addr (default :8080); give that address with\n"+
		"  --server host:port (default http://127.0.0.1:8080).\n", cmd, server, path, what)
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
