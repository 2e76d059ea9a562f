package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/internal/cli"
)

func runRelease(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("sluice release", "sluice release [--server URL] --policy NAME --key KEY --token TOKEN [--plan PLAN]",
		"Release gives back an in-flight slot of a concurrency policy, by the release\ntoken `sluice check` (POST /v1/check) answered with. Exit status: 0 released,\n1 nothing was held by that token (released already, its lease ended, or not\none of this key's: nothing changed), 2 error.", stderr)
	server := fs.String("server", "http://127.0.0.1:8080", "the service's HTTP `URL`; host:port means http://host:port")
	policy := fs.String("policy", "", "the concurrency policy's `name`")
	key := fs.String("key", "", "the `key` the slot was acquired for")
	token := fs.String("token", "", "the release `token` the check answered with")
	plan := fs.String("plan", "", "the key's `plan`, as the check named it")
	timeout := fs.Duration("timeout", 5*time.Second, "give up after this long")
	if code := cli.ParseFlags(fs, args); code >= 0 {
		return code
	}
	if *policy == "" || *key == "" || *token == "" {
		return cli.UsageError(fs, "--policy, --key and --token are required")
	}
	base, err := serverURL(*server)
	if err != nil {
		return cli.UsageError(fs, err.Error())
	}
	fields := map[string]any{"policy": *policy, "key": *key, "release_token": *token}
	if *plan != "" {
		fields["plan"] = *plan
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	var out struct {
		Released bool           `json:"released"`
		Message  string         `json:"message"`
		Error    *apiErrorReply `json:"error"`
	}
	resp, err := postAPI(ctx, base, "/v1/release", fields, &out)
	if err != nil {
		fmt.Fprintln(stderr, "release:", err)
		return exitError
	}
	if out.Error != nil || resp.StatusCode != http.StatusOK {
		fmt.Fprintf(stderr, "release: %s\n", apiMessage(resp, out.Error))
		return exitError
	}
	if !out.Released {
		fmt.Fprintf(stdout, "not released: policy %s, key %q: %s\n", *policy, *key, out.Message)
		return exitDenied
	}
	fmt.Fprintf(stdout, "released: policy %s, key %q: one slot given back\n", *policy, *key)
	return exitAllowed
}

// apiErrorReply is the error object of the HTTP API's answers.
type apiErrorReply struct{ Code, Message, Field string }

// apiMessage is what to tell of an answer that is an error.
func apiMessage(resp *http.Response, e *apiErrorReply) string {
	if e == nil {
		return resp.Status
	}
	if e.Field != "" {
		return e.Field + ": " + e.Message
	}
	return e.Message
}

// postAPI posts fields as JSON to the service's path and decodes its JSON
// answer into out. An error is the whole message to print.
func postAPI(ctx context.Context, server, path string, fields map[string]any, out any) (*http.Response, error) {
	body, _ := json.Marshal(fields)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, server+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, errors.New(unreachable(server, path, err))
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(out); err != nil {
		return nil, fmt.Errorf("%s answered %s with a body that is not the API's JSON: %v", server, resp.Status, err)
	}
	return resp, nil
}
