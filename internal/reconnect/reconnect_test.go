package reconnect

import (
	"context"
	"testing"
	"time"
)

// TestBackoff: after n failures in a row the wait lies in [d/2, d] for
// d = min(first·2ⁿ, most), spread over that range (jitter), and Reset starts
// over from first.
func TestBackoff(t *testing.T) {
	for _, c := range []struct{ first, most time.Duration }{
		{100 * time.Millisecond, 5 * time.Second},  // the override subscription
		{250 * time.Millisecond, 30 * time.Second}, // the xDS stream
	} {
		const runs = 300
		lowest, highest := make([]float64, 12), make([]float64, 12)
		for i := range lowest {
			lowest[i] = 2
		}
		for run := range runs {
			b := Backoff(c.first, c.most)
			if run%2 == 1 { // a used, then reset, backoff starts over
				for range 5 {
					b.NextBackOff()
				}
				b.Reset()
			}
			for n := range 12 {
				d := min(c.first<<n, c.most)
				got := b.NextBackOff()
				if got < d/2 || got > d {
					t.Fatalf("%v..%v: wait %d is %v, want within [%v, %v]", c.first, c.most, n, got, d/2, d)
				}
				f := float64(got) / float64(d)
				lowest[n], highest[n] = min(lowest[n], f), max(highest[n], f)
			}
		}
		for n := range 12 {
			// 300 uniform draws all outside a fifth of the range: 0.8³⁰⁰ ≈ 1e-29.
			if lowest[n] > 0.6 || highest[n] < 0.9 {
				t.Errorf("%v..%v: wait %d spans only [%.2f, %.2f] of d, want jitter over [0.5, 1]", c.first, c.most, n, lowest[n], highest[n])
			}
		}
	}
}

// TestSleep: Sleep returns when its time is up, or at once when the
// context ends, saying which.
func TestSleep(t *testing.T) {
	if !Sleep(context.Background(), time.Millisecond) {
		t.Error("Sleep on a live context reported it ended")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if Sleep(ctx, time.Hour) {
		t.Error("Sleep on an ended context reported it live")
	}
}
