package httpapi_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/httpapi"
	"github.com/sluicehq/sluice/internal/service"
	"github.com/sluicehq/sluice/internal/storestack"
	"github.com/sluicehq/sluice/memory"
)

// BenchmarkInflight measures what a request under a concurrency policy costs
// through the HTTP API in process (no network), one caller over 10,000 keys
// on the memory store: "rate" is one POST /v1/check of a gcra policy, the
// baseline; "acquire+release" a POST /v1/check of a concurrency policy and
// the POST /v1/release of its token.
func BenchmarkInflight(b *testing.B) {
	cfg := testConfig(policy("rate", sluice.GCRA, 1<<30, time.Second), policy("inflight", sluice.Concurrency, 1000, time.Minute))
	keys := make([]string, 10000)
	for i := range keys {
		keys[i] = "user-" + strconv.Itoa(i)
	}
	post := func(b *testing.B, h http.Handler, path, body string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("POST", path, bytes.NewReader([]byte(body))))
		if w.Code != http.StatusOK {
			b.Fatalf("%s: status %d: %s", path, w.Code, w.Body)
		}
		return w
	}
	newHandler := func() http.Handler {
		return httpapi.New(service.New(storestack.Of(memory.New()), cfg))
	}
	b.Run("rate", func(b *testing.B) {
		h := newHandler()
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			post(b, h, "/v1/check", `{"policy":"rate","key":"`+keys[i%len(keys)]+`"}`)
		}
	})
	b.Run("acquire+release", func(b *testing.B) {
		h := newHandler()
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			key := keys[i%len(keys)]
			w := post(b, h, "/v1/check", `{"policy":"inflight","key":"`+key+`"}`)
			var out struct {
				Checks []struct {
					ReleaseToken string `json:"release_token"`
				} `json:"checks"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil || out.Checks[0].ReleaseToken == "" {
				b.Fatalf("no token: %s", w.Body)
			}
			w = post(b, h, "/v1/release", `{"policy":"inflight","key":"`+key+`","release_token":"`+out.Checks[0].ReleaseToken+`"}`)
			if !bytes.Contains(w.Body.Bytes(), []byte(`"released":true`)) {
				b.Fatalf("not released: %s", w.Body)
			}
		}
	})
}
