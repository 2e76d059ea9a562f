package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

type httpTarget struct {
	client     *http.Client
	url        string
	releaseURL string
	policy     string
	cost       int64
}

// NewHTTP returns a target that POSTs {"policy", "key", "cost"} to
// baseURL/v1/check of a Sluice service. 200 counts as allowed, 429 as denied,
// anything else as an error with the API's message. The connection pool keeps
// one idle connection per worker (concurrency; 0 means 64): Go's default of 2
// would open and close a connection per call and measure TCP handshakes and
// TIME_WAIT instead of the limiter.
func NewHTTP(baseURL, policy string, cost int64, timeout time.Duration, concurrency int) (Target, error) {
	u, err := url.Parse(baseURL)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("http target %q: want http://host:port", baseURL)
	}
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	if concurrency <= 0 {
		concurrency = 64
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = concurrency
	tr.MaxIdleConnsPerHost = concurrency
	base := strings.TrimRight(baseURL, "/")
	return &httpTarget{client: &http.Client{Transport: tr, Timeout: timeout},
		url: base + "/v1/check", releaseURL: base + "/v1/release", policy: policy, cost: max(cost, 1)}, nil
}

func (t *httpTarget) Call(ctx context.Context, key string) (bool, error) {
	allowed, token, err := t.check(ctx, key)
	if err != nil || token == "" {
		return allowed, err
	}
	// A concurrency policy's check holds a slot: give it back at once, so
	// that the run measures an acquisition and its release, as a request
	// that ends at once would make them.
	return allowed, t.release(ctx, key, token)
}

// check POSTs one check and returns its answer, and the release token an
// admitted check of a concurrency policy holds.
func (t *httpTarget) check(ctx context.Context, key string) (bool, string, error) {
	body, err := json.Marshal(struct {
		Policy string `json:"policy"`
		Key    string `json:"key"`
		Cost   int64  `json:"cost"`
	}{t.policy, key, t.cost})
	if err != nil {
		return false, "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(body))
	if err != nil {
		return false, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := t.client.Do(req)
	if err != nil {
		return false, "", err
	}
	defer resp.Body.Close()
	// Read the whole body so the connection goes back to the pool.
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	switch {
	case err != nil:
		return false, "", err
	case resp.StatusCode == http.StatusTooManyRequests:
		return false, "", nil
	case resp.StatusCode == http.StatusOK:
		if !bytes.Contains(b, []byte(`"release_token"`)) {
			return true, "", nil // not a concurrency policy: no need to decode
		}
		var out struct {
			Checks []struct {
				ReleaseToken string `json:"release_token"`
			} `json:"checks"`
		}
		if err := json.Unmarshal(b, &out); err != nil || len(out.Checks) != 1 {
			return true, "", fmt.Errorf("a check's answer that cannot be read: %q", b)
		}
		return true, out.Checks[0].ReleaseToken, nil
	}
	return false, "", apiError(resp.Status, b)
}

// release POSTs the release of key's slot that token holds.
func (t *httpTarget) release(ctx context.Context, key, token string) error {
	body, err := json.Marshal(struct {
		Policy string `json:"policy"`
		Key    string `json:"key"`
		Token  string `json:"release_token"`
	}{t.policy, key, token})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.releaseURL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := t.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	switch {
	case err != nil:
		return err
	case resp.StatusCode != http.StatusOK:
		return apiError(resp.Status, b)
	case !bytes.Contains(b, []byte(`"released":true`)):
		return fmt.Errorf("release: %s", b)
	}
	return nil
}

// apiError is the error an HTTP API answer of status reports in body.
func apiError(status string, body []byte) error {
	var out struct {
		Error *struct{ Code, Message string } `json:"error"`
	}
	if json.Unmarshal(body, &out) == nil && out.Error != nil {
		return fmt.Errorf("%s: %s", status, out.Error.Message)
	}
	return errors.New(status)
}

func (t *httpTarget) Close() { t.client.CloseIdleConnections() }
