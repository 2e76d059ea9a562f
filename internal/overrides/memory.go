package overrides

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// memoryBackend holds the overrides of one process.
type memoryBackend struct {
	mu   sync.Mutex
	v    int64
	byID map[string]map[string]Override // policy → target → override
}

func (m *memoryBackend) put(_ context.Context, o Override, now time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.prune(now)
	if m.byID == nil {
		m.byID = map[string]map[string]Override{}
	}
	ps := m.byID[o.Policy]
	if _, exists := ps[o.Target()]; !exists {
		total := 0
		for _, p := range m.byID {
			total += len(p)
		}
		switch {
		case len(ps) >= MaxPerPolicy:
			return errFull(true, MaxPerPolicy)
		case total >= MaxTotal:
			return errFull(false, MaxTotal)
		}
	}
	if ps == nil {
		ps = map[string]Override{}
		m.byID[o.Policy] = ps
	}
	ps[o.Target()] = o
	m.v++
	return nil
}

func (m *memoryBackend) remove(_ context.Context, policy, target string, now time.Time) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.byID[policy][target]
	if !ok {
		return false, nil
	}
	delete(m.byID[policy], target)
	if len(m.byID[policy]) == 0 {
		delete(m.byID, policy)
	}
	m.v++
	return !o.Expired(now), nil
}

// sync returns every override when anything changed: the Store is in the
// same process.
func (m *memoryBackend) sync(_ context.Context, from position) (delta, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d := delta{to: position{version: m.v}}
	if d.to == from {
		return d, nil
	}
	d.full = true
	for _, ps := range m.byID {
		for _, o := range ps {
			d.changes = append(d.changes, change{o: o})
		}
	}
	return d, nil
}

// prune forgets expired overrides, so that they do not count against the
// bounds; m.mu is held.
func (m *memoryBackend) prune(now time.Time) {
	for policy, ps := range m.byID {
		for t, o := range ps {
			if o.Expired(now) {
				delete(ps, t)
			}
		}
		if len(ps) == 0 {
			delete(m.byID, policy)
		}
	}
}

// errFull refuses one more override: a policy holds at most max (perPolicy),
// or all policies together.
func errFull(perPolicy bool, max int) error {
	if perPolicy {
		return fmt.Errorf("%w: a policy holds at most %d; remove some first", ErrFull, max)
	}
	return fmt.Errorf("%w: at most %d in all; remove some first", ErrFull, max)
}
