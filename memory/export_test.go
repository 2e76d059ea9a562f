package memory

// NewCompactFirst returns a store that keeps every new state its compact part
// holds exactly there rather than in the exact part: the conformance suite
// run on it checks the compact part's decisions.
func NewCompactFirst(opts ...Option) *Store {
	s := New(opts...)
	s.compactFirst = true
	return s
}
