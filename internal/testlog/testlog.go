// Package testlog is what tests read logs with: a buffer the goroutines of
// a server under test and the test itself can share.
package testlog

import (
	"bytes"
	"io"
	"log/slog"
	"sync"
)

// Buffer is a bytes.Buffer safe for concurrent use.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Logger returns a text logger writing to w.
func Logger(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }
