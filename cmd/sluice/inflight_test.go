package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/testwait"
)

// inflightConfig is a native config on the Redis at url with two
// concurrency policies: wide, of n slots held for an hour unless released,
// and short, of n slots with a 2 s lease.
func inflightConfig(url string, n int) string {
	return fmt.Sprintf("store:\n  url: %q\npolicies:\n"+
		"  - {name: wide, algorithm: concurrency, limit: %d, period: 1h}\n"+
		"  - {name: short, algorithm: concurrency, limit: %d, period: 2s}\n", url, n, n)
}

// startServeProcess runs `sluice serve` as a process of its own with the
// native config, and returns it and its HTTP API's base URL.
func startServeProcess(t *testing.T, native string) (*os.Process, string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "sluice.yaml")
	writeFile(t, file, native)
	addr := "127.0.0.1:" + freePort(t)
	cmd, _ := startSluice(t, []string{"PATH=" + os.Getenv("PATH")}, "serve", "--config", file,
		"--http-addr", addr, "--grpc-addr", "", "--health-addr", "", "--log-format", "json")
	return cmd.Process, "http://" + addr
}

// acquireReply is what the tests read of a /v1/check answer.
type acquireReply struct {
	Allowed bool `json:"allowed"`
	Checks  []struct {
		ReleaseToken string `json:"release_token"`
	} `json:"checks"`
}

// acquire checks one slot of policy for key on the server at base.
func acquire(t *testing.T, base, policy, key string) (bool, string) {
	t.Helper()
	ok, token, err := tryAcquire(base, policy, key)
	if err != nil {
		t.Fatal(err)
	}
	return ok, token
}

// tryAcquire is acquire for a goroutine of its own, which may not end the
// test.
func tryAcquire(base, policy, key string) (bool, string, error) {
	resp, err := httpc.Post(base+"/v1/check", "application/json", strings.NewReader(`{"policy":"`+policy+`","key":"`+key+`"}`))
	if err != nil {
		return false, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return false, "", err
	}
	var r acquireReply
	if err := json.Unmarshal(body, &r); err != nil || len(r.Checks) != 1 ||
		r.Allowed != (resp.StatusCode == http.StatusOK) || r.Allowed != (r.Checks[0].ReleaseToken != "") {
		return false, "", fmt.Errorf("/v1/check: %d %s: %v", resp.StatusCode, body, err)
	}
	return r.Allowed, r.Checks[0].ReleaseToken, nil
}

// releaseSlot releases a slot on the server at base and reports whether one
// was held.
func releaseSlot(t *testing.T, base, policy, key, token string) bool {
	t.Helper()
	resp, body := do(t, "POST", base+"/v1/release", `{"policy":"`+policy+`","key":"`+key+`","release_token":"`+token+`"}`)
	var r struct {
		Released bool `json:"released"`
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/v1/release: %d %s: %v", resp.StatusCode, body, err)
	}
	return r.Released
}

// acquireAtOnce sends n acquisitions of policy's key at once, spread over
// the servers, and returns the tokens of those admitted.
func acquireAtOnce(t *testing.T, bases []string, policy, key string, n int) []string {
	t.Helper()
	var mu sync.Mutex
	var tokens []string
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			ok, token, err := tryAcquire(bases[i%len(bases)], policy, key)
			if err != nil {
				t.Error(err)
			}
			if ok {
				mu.Lock()
				tokens = append(tokens, token)
				mu.Unlock()
			}
		}()
	}
	close(start)
	wg.Wait()
	return tokens
}

// TestInflightTwoServeProcesses: two `sluice serve` processes on one Redis
// admit exactly N of N+1 simultaneous acquisitions; a release with a wrong
// or a reused token frees nothing, and one with the right token frees one
// slot whichever process it goes to; the slots held through a process that
// is SIGKILLed return when their 2 s lease ends.
func TestInflightTwoServeProcesses(t *testing.T) {
	const n = 5
	r := redistest.Start(t)
	a, baseA := startServeProcess(t, inflightConfig(r.URL(), n))
	_, baseB := startServeProcess(t, inflightConfig(r.URL(), n))
	bases := []string{baseA, baseB}

	tokens := acquireAtOnce(t, bases, "wide", "k", n+1)
	if len(tokens) != n {
		t.Fatalf("%d of %d simultaneous acquisitions admitted, want %d", len(tokens), n+1, n)
	}
	if ok, _ := acquire(t, baseB, "wide", "k"); ok {
		t.Fatal("an acquisition over the limit was admitted")
	}
	for _, bad := range []struct{ key, token string }{
		{"k", strings.Repeat("0", 32)}, {"k", "local:" + tokens[0]}, {"other", tokens[0]},
	} {
		if releaseSlot(t, baseA, "wide", bad.key, bad.token) {
			t.Fatalf("release of %s with %q freed a slot", bad.key, bad.token)
		}
	}
	if ok, _ := acquire(t, baseA, "wide", "k"); ok {
		t.Fatal("a wrong token freed a slot")
	}
	if !releaseSlot(t, baseB, "wide", "k", tokens[0]) {
		t.Fatal("the right token, on the other process, freed nothing")
	}
	if releaseSlot(t, baseA, "wide", "k", tokens[0]) {
		t.Fatal("a reused token freed a slot")
	}
	if ok, _ := acquire(t, baseA, "wide", "k"); !ok {
		t.Fatal("the released slot was not free")
	}
	if ok, _ := acquire(t, baseB, "wide", "k"); ok {
		t.Fatal("the reused token freed a second slot")
	}

	// Every short slot through process A, which then dies without a word.
	for i := range n {
		if ok, _ := acquire(t, baseA, "short", "k"); !ok {
			t.Fatalf("short acquisition %d denied", i)
		}
	}
	if err := a.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	// B sees the slots held until their leases end — each 2 s after A took
	// it, and A took them one by one — then every one free, and never more
	// than N: each poll releases what it got at once.
	testwait.UntilSaw(t, "the killed process's slots to return", func() (bool, string) {
		got := acquireAtOnce(t, []string{baseB}, "short", "k", n+1)
		if len(got) > n {
			t.Fatalf("%d of %d acquisitions admitted, over the limit of %d", len(got), n+1, n)
		}
		for _, token := range got {
			if !releaseSlot(t, baseB, "short", "k", token) {
				t.Fatal("a slot just acquired was not held")
			}
		}
		return len(got) == n, fmt.Sprintf("%d of %d slots free", len(got), n)
	})
	// Generous: the lease is 2 s, the machine may be busy.
	if took := time.Since(killed); took > 20*time.Second {
		t.Errorf("the slots returned %v after the kill, want about the 2 s lease", took)
	}
}

// TestInflightCluster: on a Redis Cluster, two serve nodes admit exactly N
// of N+1 simultaneous acquisitions of one key.
func TestInflightCluster(t *testing.T) {
	const n = 4
	c := redistest.StartCluster(t, 3, 0)
	nodes := []*served{startServe(t, inflightConfig(c.URL(), n)), startServe(t, inflightConfig(c.URL(), n))}
	tokens := acquireAtOnce(t, []string{nodes[0].base, nodes[1].base}, "wide", "k", n+1)
	if len(tokens) != n {
		t.Fatalf("%d of %d simultaneous acquisitions admitted, want %d", len(tokens), n+1, n)
	}
	if !releaseSlot(t, nodes[1].base, "wide", "k", tokens[0]) || releaseSlot(t, nodes[0].base, "wide", "k", tokens[0]) {
		t.Fatal("the token did not release exactly once")
	}
	if ok, _ := acquire(t, nodes[0].base, "wide", "k"); !ok {
		t.Fatal("the released slot was not free")
	}
}
