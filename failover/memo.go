package failover

import (
	"sync"
	"time"

	"github.com/sluicehq/sluice"
)

// maxMemo bounds the keys the denial memo remembers.
const maxMemo = 1 << 16

// memoKey names one key of one policy.
type memoKey struct {
	policy *sluice.Policy
	key    string
}

// denialMemo remembers, for FailLocal, the keys the primary denied and until
// when: a key the shared limit has exhausted stays denied while the primary
// is away, instead of starting afresh on the local store. A hot key over its
// limit — the one an attacker drives — is the key whose calls time out first
// when the primary stalls, and the one whose local budget would otherwise be
// a free extra limit.
type denialMemo struct {
	mu    sync.RWMutex
	until map[memoKey]int64 // unix ns
}

// note records the primary's result for req, decided at now: a denial of a
// key that could not afford the cost itself (in a denied batch, the other
// keys are denied only with it).
func (m *denialMemo) note(req sluice.Request, r sluice.Result, now time.Time) {
	if r.Allowed || r.RetryAfter <= 0 || req.Cost == 0 || r.Remaining >= req.Cost {
		return
	}
	k := memoKey{req.Policy, req.Key}
	until := now.Add(r.RetryAfter).UnixNano()
	m.mu.RLock()
	old, ok := m.until[k]
	m.mu.RUnlock()
	if ok && old >= until-int64(time.Millisecond) {
		return // nothing new: a hot key denied again and again writes nothing
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.until == nil {
		m.until = make(map[memoKey]int64)
	}
	if len(m.until) >= maxMemo {
		nowNS := now.UnixNano()
		for k, u := range m.until {
			if u <= nowNS {
				delete(m.until, k)
			}
		}
		if len(m.until) >= maxMemo {
			clear(m.until)
		}
	}
	m.until[k] = until
}

// retryIn is how long req's key stays denied, 0 if it is not.
func (m *denialMemo) retryIn(req sluice.Request, now time.Time) time.Duration {
	if req.Cost == 0 {
		return 0
	}
	m.mu.RLock()
	u, ok := m.until[memoKey{req.Policy, req.Key}]
	m.mu.RUnlock()
	if !ok {
		return 0
	}
	return max(0, time.Duration(u-now.UnixNano()))
}
