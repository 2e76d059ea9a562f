package storestack

import (
	"testing"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/memory"
)

// store.max_keys and store.max_bytes reach the memory store; unset, its
// defaults hold.
func TestOpenStoreMemoryBounds(t *testing.T) {
	for _, c := range []struct {
		cfg   config.Store
		keys  int
		bytes int64
	}{
		{config.Store{URL: "memory://"}, memory.DefaultMaxKeys, memory.DefaultMaxBytes},
		{config.Store{MaxKeys: 5000, MaxBytes: 8 << 20}, 5000, 8 << 20},
	} {
		s, err := Open(c.cfg)
		if err != nil {
			t.Fatal(err)
		}
		st := s.Memory.Stats()
		s.Close()
		if st.MaxKeys != c.keys || st.MaxBytes != c.bytes {
			t.Fatalf("%+v: store bounds %d keys %d bytes, want %d and %d", c.cfg, st.MaxKeys, st.MaxBytes, c.keys, c.bytes)
		}
	}
}
