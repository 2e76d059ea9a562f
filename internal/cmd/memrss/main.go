// Command memrss measures the memory store under a key-rotation attack: it
// sends a new key with every decision to a memory.Store with the default
// bounds (or -max-keys, -max-bytes) and prints what the store holds, what it
// charges against its byte budget, the Go heap and the process's RSS.
//
//	go run ./internal/cmd/memrss -keylen 16 -keys 3000000
//	go run ./internal/cmd/memrss -keylen 1000 -keys 1500000
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memory"
)

func main() {
	keyLen := flag.Int("keylen", 16, "bytes per key (at most 1024)")
	keys := flag.Int("keys", 3_000_000, "distinct keys to send, one decision each")
	maxKeys := flag.Int("max-keys", memory.DefaultMaxKeys, "memory.WithMaxKeys")
	maxBytes := flag.Int64("max-bytes", memory.DefaultMaxBytes, "memory.WithMaxBytes")
	limit := flag.Int64("limit", 1000, "the attacked policy's limit per hour (under 64: keys are never safe to drop, new ones go to the compact part)")
	flag.Parse()
	if *keyLen < 12 || *keyLen > sluice.MaxKeyLen {
		log.Fatalf("-keylen must be between 12 and %d", sluice.MaxKeyLen)
	}

	s := memory.New(memory.WithMaxKeys(*maxKeys), memory.WithMaxBytes(*maxBytes))
	l, err := sluice.New(s, sluice.Policy{Name: "rotated", Algorithm: sluice.GCRA, Limit: *limit, Period: time.Hour})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	pad := strings.Repeat("k", *keyLen)
	buf := make([]byte, 0, *keyLen)
	start := time.Now()
	denied := 0
	for i := range *keys {
		// A fixed-length key: the counter, padded.
		buf = strconv.AppendInt(buf[:0], int64(i), 10)
		buf = append(buf, pad[:*keyLen-len(buf)]...)
		r, err := l.Allow(ctx, string(buf))
		if err != nil {
			log.Fatal(err)
		}
		if !r.Allowed {
			denied++
		}
		if (i+1)%(*keys/4) == 0 {
			report(s, i+1, denied, time.Since(start))
		}
	}
	runtime.KeepAlive(s)
}

func report(s *memory.Store, sent, denied int, took time.Duration) {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	st := s.Stats()
	fmt.Printf("sent %d keys in %v (%d denied): store holds %d keys exactly and %d compactly (of %d), charged %.1f MiB of %.0f MiB (%d evicted, %d spilled, %d folded, %d refused); heap in use %.1f MiB; RSS %s, peak %s\n",
		sent, took.Round(time.Millisecond), denied, st.Keys, st.ColdKeys, st.ColdSlots, mib(st.Bytes), mib(st.MaxBytes),
		st.Evicted, st.Spilled, st.Folded, st.Refused, mib(int64(m.HeapInuse)), procStatus("VmRSS"), procStatus("VmHWM"))
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// procStatus returns a field of /proc/self/status (Linux), e.g. "812345 kB".
func procStatus(field string) string {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return "n/a"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return strings.TrimSpace(v)
			}
			return fmt.Sprintf("%.0f MiB", float64(kb)/1024)
		}
	}
	return "n/a"
}
