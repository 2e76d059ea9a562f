package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluicehq/sluice/internal/cli"
)

const overrideDescription = `Override sets, lists and removes limits set at runtime through a running
service's admin API: a limit for one key of a policy, or for every key under a
prefix (a tenant). The most specific applies: the key's own, else the longest
prefix's, else the policy's. With a Redis store every node applies them within
a second; with the memory store only the node that was told.

  sluice override set POLICY (--key K | --prefix P) --limit N [--period D]
                      [--burst B] [--ttl D | --expires-at T] [--reason TEXT]
  sluice override list [POLICY]
  sluice override rm POLICY (--key K | --prefix P)

The admin token is read from --token-file or SLUICE_ADMIN_TOKEN.`

// overrideClient is what every override subcommand shares.
type overrideClient struct {
	server, tokenFile string
	timeout           time.Duration
}

func (c *overrideClient) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.server, "server", "http://127.0.0.1:8080", "the service's HTTP `URL`; host:port means http://host:port")
	fs.StringVar(&c.tokenFile, "token-file", "", "`file` holding the admin token (default: $SLUICE_ADMIN_TOKEN)")
	fs.DurationVar(&c.timeout, "timeout", 5*time.Second, "give up after this long")
}

func runOverride(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	sub := ""
	if len(args) > 0 {
		sub, args = args[0], args[1:]
	}
	switch sub {
	case "set":
		return runOverrideSet(ctx, args, stdout, stderr)
	case "list", "ls":
		return runOverrideList(ctx, args, stdout, stderr)
	case "rm", "delete":
		return runOverrideRm(ctx, args, stdout, stderr)
	case "-h", "-help", "--help", "help":
		// Help goes to stderr, as every command's flag help does.
		fmt.Fprintf(stderr, "Usage: sluice override set|list|rm ...\n\n%s\n\nEach subcommand's --help lists its flags.\n", overrideDescription)
		return 0
	}
	fmt.Fprintf(stderr, "sluice override: want set, list or rm, got %q (sluice override --help explains them)\n", sub)
	return 2
}

func runOverrideSet(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("sluice override set", "sluice override set POLICY (--key K | --prefix P) --limit N [flags]", overrideDescription, stderr)
	var c overrideClient
	c.addFlags(fs)
	key := fs.String("key", "", "the one `key` the limit applies to")
	prefix := fs.String("prefix", "", "apply the limit to every key starting with this `prefix`")
	limit := fs.Int64("limit", 0, "the units admitted per period")
	period := fs.String("period", "", "the period, a Go `duration` such as 1m (default: the policy's)")
	burst := fs.Int64("burst", 0, "the bucket capacity for token_bucket, leaky_bucket and gcra (default: the limit)")
	ttl := fs.String("ttl", "", "remove the override after this `duration`, such as 24h")
	expiresAt := fs.String("expires-at", "", "remove the override at this RFC 3339 `time`")
	reason := fs.String("reason", "", "why it is set, shown by list")
	pos, code := cli.ParseArgs(fs, args)
	if code >= 0 {
		return code
	}
	if len(pos) != 1 {
		return cli.UsageError(fs, "give one POLICY")
	}
	if (*key == "") == (*prefix == "") || *limit == 0 {
		return cli.UsageError(fs, "give --limit and one of --key and --prefix")
	}
	body := map[string]any{"limit": *limit}
	for name, v := range map[string]string{"key": *key, "prefix": *prefix, "period": *period, "ttl": *ttl, "expires_at": *expiresAt, "reason": *reason} {
		if v != "" {
			body[name] = v
		}
	}
	if *burst != 0 {
		body["burst"] = *burst
	}
	b, _ := json.Marshal(body)
	var out overrideJSON
	if code := c.call(ctx, fs, http.MethodPut, "/v1/admin/overrides/"+url.PathEscape(pos[0]), string(b), &out, stderr); code != 0 {
		return code
	}
	fmt.Fprintf(stdout, "set: %s\n", out.describe())
	return 0
}

func runOverrideList(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("sluice override list", "sluice override list [POLICY] [flags]", overrideDescription, stderr)
	var c overrideClient
	c.addFlags(fs)
	asJSON := fs.Bool("json", false, "print the API's JSON")
	pos, code := cli.ParseArgs(fs, args)
	if code >= 0 {
		return code
	}
	if len(pos) > 1 {
		return cli.UsageError(fs, "give at most one POLICY")
	}
	path := "/v1/admin/overrides"
	if len(pos) == 1 {
		path += "/" + url.PathEscape(pos[0])
	}
	var out struct {
		Overrides []overrideJSON `json:"overrides"`
	}
	if code := c.call(ctx, fs, http.MethodGet, path, "", &out, stderr); code != 0 {
		return code
	}
	if *asJSON {
		_ = json.NewEncoder(stdout).Encode(out)
		return 0
	}
	if len(out.Overrides) == 0 {
		fmt.Fprintln(stdout, "no overrides")
		return 0
	}
	tw := tabwriter.NewWriter(stdout, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "POLICY\tTARGET\tLIMIT\tPERIOD\tBURST\tEXPIRES\tREASON")
	for _, o := range out.Overrides {
		expires := o.ExpiresAt
		if expires == "" {
			expires = "never"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%s\t%s\n", o.Policy, o.target(), o.Limit, o.Period, o.Burst, expires, o.Reason)
	}
	_ = tw.Flush()
	return 0
}

func runOverrideRm(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("sluice override rm", "sluice override rm POLICY (--key K | --prefix P) [flags]", overrideDescription, stderr)
	var c overrideClient
	c.addFlags(fs)
	key := fs.String("key", "", "remove the override of this `key`")
	prefix := fs.String("prefix", "", "remove the override of this `prefix`")
	pos, code := cli.ParseArgs(fs, args)
	if code >= 0 {
		return code
	}
	if len(pos) != 1 || (*key == "") == (*prefix == "") {
		return cli.UsageError(fs, "give one POLICY and one of --key and --prefix")
	}
	q := url.Values{}
	if *key != "" {
		q.Set("key", *key)
	} else {
		q.Set("prefix", *prefix)
	}
	if code := c.call(ctx, fs, http.MethodDelete, "/v1/admin/overrides/"+url.PathEscape(pos[0])+"?"+q.Encode(), "", nil, stderr); code != 0 {
		return code
	}
	fmt.Fprintf(stdout, "removed: policy %s, %s\n", pos[0], (&overrideJSON{Key: *key, Prefix: *prefix}).target())
	return 0
}

// overrideJSON is an override as the API shows it.
type overrideJSON struct {
	Policy    string `json:"policy"`
	Key       string `json:"key,omitempty"`
	Prefix    string `json:"prefix,omitempty"`
	Limit     int64  `json:"limit"`
	Period    string `json:"period"`
	Burst     int64  `json:"burst,omitempty"`
	ExpiresAt string `json:"expires_at,omitempty"`
	Reason    string `json:"reason,omitempty"`
	UpdatedAt string `json:"updated_at,omitempty"`
}

func (o *overrideJSON) target() string {
	if o.Prefix != "" {
		return fmt.Sprintf("prefix %q", o.Prefix)
	}
	return fmt.Sprintf("key %q", o.Key)
}

func (o *overrideJSON) describe() string {
	s := fmt.Sprintf("policy %s, %s: %d per %s", o.Policy, o.target(), o.Limit, o.Period)
	if o.Burst != 0 {
		s += fmt.Sprintf(", burst %d", o.Burst)
	}
	if o.ExpiresAt != "" {
		s += ", until " + o.ExpiresAt
	}
	return s
}

// call sends one admin request and decodes the answer into out (when not
// nil); it returns 0, or the exit status after printing why.
func (c *overrideClient) call(ctx context.Context, fs *flag.FlagSet, method, path, body string, out any, stderr io.Writer) int {
	base, err := serverURL(c.server)
	if err != nil {
		return cli.UsageError(fs, err.Error())
	}
	token := os.Getenv("SLUICE_ADMIN_TOKEN")
	if c.tokenFile != "" {
		b, err := os.ReadFile(c.tokenFile)
		if err != nil {
			fmt.Fprintf(stderr, "%s: --token-file: %v\n", fs.Name(), err)
			return 2
		}
		token = strings.TrimSpace(string(b))
	}
	if token == "" {
		return cli.UsageError(fs, "the admin token is needed: --token-file FILE or SLUICE_ADMIN_TOKEN")
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", fs.Name(), err)
		return 1
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", fs.Name(), err)
		return 1
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error *struct{ Code, Message, Field string } `json:"error"`
		}
		msg := resp.Status
		if json.Unmarshal(raw, &e) == nil && e.Error != nil {
			msg = e.Error.Message
			if e.Error.Field != "" {
				msg = e.Error.Field + ": " + msg
			}
		}
		if resp.StatusCode == http.StatusNotFound && strings.HasPrefix(msg, "no such endpoint") {
			msg += " (is the admin API on? serve needs --admin-token-file or SLUICE_ADMIN_TOKEN; with --admin-addr, give that address as --server)"
		}
		fmt.Fprintf(stderr, "%s: %s\n", fs.Name(), msg)
		return 1
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			fmt.Fprintf(stderr, "%s: %s answered with a body that is not the API's JSON: %v\n", fs.Name(), base, err)
			return 1
		}
	}
	return 0
}
