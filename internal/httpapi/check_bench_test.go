package httpapi_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/httpapi"
)

// BenchmarkCheck measures POST /v1/check in process, handler and all but
// without the network: one check per request from parallel callers over
// 10,000 keys, under a limit they never reach. Its variants
// (checkBenchVariants) compare tracing off and on.
func BenchmarkCheck(b *testing.B) {
	cfg := testConfig(policy("per_user", sluice.GCRA, 1<<30, time.Second))
	bodies := make([][]byte, 10000)
	for i := range bodies {
		bodies[i] = []byte(`{"policy":"per_user","key":"user-` + strconv.Itoa(i) + `"}`)
	}
	for _, v := range checkBenchVariants(b) {
		b.Run(v.name, func(b *testing.B) {
			h := httpapi.New(benchService(cfg, v))
			var next atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					req := httptest.NewRequest("POST", "/v1/check", bytes.NewReader(bodies[int(next.Add(1))%len(bodies)]))
					w := httptest.NewRecorder()
					h.ServeHTTP(w, req)
					if w.Code != http.StatusOK {
						b.Fatalf("status %d: %s", w.Code, w.Body)
					}
				}
			})
		})
	}
}
