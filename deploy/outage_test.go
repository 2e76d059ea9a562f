package deploy

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/testwait"
)

// decision is what one POST /v1/check answered.
type decision struct {
	status int
	body   struct {
		Allowed bool `json:"allowed"`
		Checks  []struct {
			Allowed  bool  `json:"allowed"`
			Limit    int64 `json:"limit"`
			Degraded bool  `json:"degraded"`
		} `json:"checks"`
	}
	raw string
}

func decide(t *testing.T, base, policy, key string) decision {
	t.Helper()
	resp, err := http.Post(base+"/v1/check", "application/json", strings.NewReader(fmt.Sprintf(`{"policy":%q,"key":%q}`, policy, key)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	d := decision{status: resp.StatusCode, raw: string(raw)}
	if err := json.Unmarshal(raw, &d.body); err != nil || len(d.body.Checks) != 1 {
		t.Fatalf("/v1/check: %d %s: %v", resp.StatusCode, raw, err)
	}
	return d
}

// TestRedisOutageKeepsPodsReady runs sluice serve with the configuration the
// Helm chart and the manifests ship, renders and all, on a real Redis, and
// stops Redis: the path the Deployment's readiness probe asks keeps
// answering 200 within the probe's timeout — the pods stay in the Services —
// and every decision is the fail policy's: degraded, each limit divided by
// the most pods the Deployment can run.
func TestRedisOutageKeepsPodsReady(t *testing.T) {
	for _, deployment := range []struct {
		name    string
		objects func(t *testing.T) objects
	}{
		{"chart", func(t *testing.T) objects {
			var o objects
			if err := decodeObjects([]byte(helm(t, "template", "rel", chart)), &o); err != nil {
				t.Fatal(err)
			}
			return o
		}},
		{"manifests", func(t *testing.T) objects {
			o, _ := manifestObjects(t)
			return o
		}},
	} {
		t.Run(deployment.name, func(t *testing.T) {
			o := deployment.objects(t)
			files := checkSluiceObjects(t, &o)
			cfg, pods := checkFailPolicy(t, &o, files)
			_, c := o.sluiceDeployment(t)
			probe := c.ReadinessProbe
			probeTimeout := time.Duration(probe.TimeoutSeconds) * time.Second

			redis := redistest.Start(t)
			dir := t.TempDir()
			args := []string{"--store", redis.URL()} // the Service name stands for this Redis
			for _, f := range files {
				path := filepath.Join(dir, f.name)
				if err := os.WriteFile(path, []byte(withSecretsIn(t, dir, f.text)), 0o644); err != nil {
					t.Fatal(err)
				}
				args = append(args, "--config", path)
			}
			base := startServe(t, args...)
			client := &http.Client{Timeout: probeTimeout} // the kubelet gives up at the probe's timeout
			ready := func() (int, string) {
				t.Helper()
				resp, err := client.Get(base + probe.HTTPGet.Path)
				if err != nil {
					t.Fatalf("readiness probe %s: %v (timeout %v)", probe.HTTPGet.Path, err, probeTimeout)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, string(b)
			}

			// Redis decides.
			testwait.UntilSaw(t, "Redis deciding", func() (bool, string) {
				code, body := httpGet(t, base+"/readyz/store")
				return code == 200 && !decide(t, base, "api_per_key", "before").body.Checks[0].Degraded, fmt.Sprintf("/readyz/store %d %s", code, body)
			})
			if code, body := ready(); code != 200 {
				t.Fatalf("readiness probe %s with Redis up: %d %s", probe.HTTPGet.Path, code, body)
			}

			redis.Kill()
			// Every pod falls back alone: on this one, a fresh key gets the
			// policy's burst divided by the pod count, then one more per
			// divided emission interval that passes.
			p := cfg.Policy("api_per_key")
			if p == nil {
				t.Fatal("the shipped configuration has no api_per_key policy")
			}
			limit, burst := max(1, p.Limit/int64(pods)), max(1, p.Burst/int64(pods))
			start := time.Now()
			admitted, sent := 0, int(burst)+10
			for i := range sent {
				d := decide(t, base, "api_per_key", "during-outage")
				if !d.body.Checks[0].Degraded || d.status != map[bool]int{true: 200, false: 429}[d.body.Allowed] {
					t.Fatalf("check %d with Redis down: %d %s; want 200 or 429, degraded (on_error %s)", i, d.status, d.raw, cfg.Store.OnError)
				}
				if d.body.Allowed {
					admitted++
				}
				// The probe answers 200 before and after the breaker opens.
				if code, body := ready(); code != 200 || !strings.Contains(body, `"degraded"`) {
					t.Fatalf("readiness probe %s with Redis down: %d %s; want 200 degraded: the pod answers by its fail policy", probe.HTTPGet.Path, code, body)
				}
			}
			interval := p.Period / time.Duration(limit)
			most := int(burst) + int(time.Since(start)/interval) + 1
			if admitted < int(burst) || admitted > most {
				t.Fatalf("%d of %d admitted on one pod with Redis down; want the burst %d divided by %d pods (%d), at most %d after %v",
					admitted, sent, p.Burst, pods, burst, most, time.Since(start).Round(time.Millisecond))
			}
			t.Logf("%s: %d of %d admitted on one of %d pods with Redis down (burst %d → %d)", deployment.name, admitted, sent, pods, p.Burst, burst)
			if code, body := httpGet(t, base+"/readyz/store"); code != 503 {
				t.Errorf("/readyz/store with Redis down: %d %s; want 503, the strict check", code, body)
			}
			// The outage is in the metrics the alerts read
			// (SluiceStoreUnreachable, SluiceDegradedDecisions).
			_, metrics := httpGet(t, base+"/metrics")
			if v := sumSeries(metrics, `sluice_store_errors_total{`); v == 0 {
				t.Error("/metrics: no sluice_store_errors_total with Redis down")
			}
			if v := sumSeries(metrics, `sluice_store_degraded_decisions_total{on_error="`+cfg.Store.OnError+`"}`); v < float64(sent) {
				t.Errorf("/metrics: %v degraded decisions (on_error %s) after %d checks with Redis down", v, cfg.Store.OnError, sent)
			}
		})
	}
}

// sumSeries adds up the samples of a Prometheus text exposition whose series
// begin with prefix.
func sumSeries(metrics, prefix string) float64 {
	var sum float64
	for _, line := range strings.Split(metrics, "\n") {
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		if i := strings.LastIndexByte(line, ' '); i > 0 {
			if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
				sum += v
			}
		}
	}
	return sum
}
