package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/internal/cli"
)

func runCharge(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("sluice charge", "sluice charge [--server URL] --policy NAME --key KEY --cost N [--plan PLAN]",
		"Charge tells a running service (its HTTP API, POST /v1/charge) about usage that\n"+
			"already happened — the tokens a response used, the bytes sent — and prints\n"+
			"what is left. The cost is recorded even beyond the limit: the key then owes\n"+
			"the excess, and its checks are denied until time repays it.\n"+
			"Exit status: 0 recorded, 2 error.", stderr)
	kf := addKeyFlags(fs)
	cost := fs.Int64("cost", -1, "the units used (required)")
	if code := kf.parse(fs, args); code >= 0 {
		return code
	}
	if *cost < 0 {
		return cli.UsageError(fs, "--cost is required: the units used, 0 or more")
	}
	base, timeout, fields := kf.server, &kf.timeout, kf.fields(*cost)
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	var out struct {
		Policy       string         `json:"policy"`
		Key          string         `json:"key"`
		Limit        int64          `json:"limit"`
		Remaining    int64          `json:"remaining"`
		RetryAfterMS int64          `json:"retry_after_ms"`
		ResetAfterMS int64          `json:"reset_after_ms"`
		Error        *apiErrorReply `json:"error"`
	}
	resp, err := postAPI(ctx, base, "/v1/charge", fields, &out)
	if err != nil {
		fmt.Fprintln(stderr, "charge:", err)
		return exitError
	}
	if out.Error != nil || resp.StatusCode != http.StatusOK {
		fmt.Fprintf(stderr, "charge: %s\n", apiMessage(resp, out.Error))
		return exitError
	}
	ms := func(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
	fmt.Fprintf(stdout, "charged %d: policy %s, key %q: ", *cost, out.Policy, out.Key)
	switch {
	case out.Remaining < 0:
		fmt.Fprintf(stdout, "owes %d (limit %d); a request of cost 1 is denied for %v", -out.Remaining, out.Limit, ms(out.RetryAfterMS))
	case out.Remaining == 0:
		fmt.Fprintf(stdout, "0 of %d left; a request of cost 1 is denied for %v", out.Limit, ms(out.RetryAfterMS))
	default:
		fmt.Fprintf(stdout, "%d of %d left", out.Remaining, out.Limit)
	}
	fmt.Fprintf(stdout, "; full again in %v\n", ms(out.ResetAfterMS))
	return exitAllowed
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

// fields is the JSON body of a check or a charge of cost.
func (kf *keyFlags) fields(cost int64) map[string]any {
	fields := map[string]any{"policy": kf.policy, "key": kf.key, "cost": cost}
	if kf.plan != "" {
		fields["plan"] = kf.plan
	}
	return fields
}
