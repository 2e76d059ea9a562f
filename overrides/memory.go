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
		if err := checkBounds(len(ps), total); err != nil {
			return err
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

func (m *memoryBackend) remove(_ context.Context, policy, target string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.byID[policy][target]; !ok {
		return false, nil
	}
	delete(m.byID[policy], target)
	if len(m.byID[policy]) == 0 {
		delete(m.byID, policy)
	}
	m.v++
	return true, nil
}

func (m *memoryBackend) load(_ context.Context, now time.Time) (int64, []Override, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var list []Override
	for _, ps := range m.byID {
		for _, o := range ps {
			if !o.Expired(now) {
				list = append(list, o)
			}
		}
	}
	return m.v, list, nil
}

func (m *memoryBackend) version(context.Context) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.v, nil
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

// checkBounds refuses one more override for a policy holding n of a total.
func checkBounds(n, total int) error {
	switch {
	case n >= MaxPerPolicy:
		return fmt.Errorf("%w: a policy holds at most %d; remove some first", ErrFull, MaxPerPolicy)
	case total >= MaxTotal:
		return fmt.Errorf("%w: at most %d in all; remove some first", ErrFull, MaxTotal)
	}
	return nil
}
