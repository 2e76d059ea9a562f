package storetest

import (
	"math/big"

	"github.com/sluicehq/sluice"
)

// model is an independent statement of the contract (docs/semantics.md) for one (policy, key): it
// decides admission straight from the contract's table — brute-force sums over
// the admitted history for the windows and the log, a token bucket with exact
// rational tokens for the buckets — and finds Remaining, RetryAfter and
// ResetAfter by searching, not by the stores' closed forms.
type model struct {
	alg        sluice.Algorithm
	L, P, B, T int64 // units, µs, units, µs (T = ceil(P/L))
	hist       []admission

	tokens  *big.Rat // buckets: tokens at tokenAt
	tokenAt int64
	lastEnd int64 // leaky bucket: when the queue is empty (last departure + its cost·T)
	span    int64 // buckets: the largest B·T of any policy so far, which bounds every wait
	debt    int64 // buckets: the µs of credit charged so far, which bounds what is owed
}

type admission struct{ t, n int64 }

func newModel(p sluice.Policy) *model {
	m := &model{alg: p.Algorithm, L: p.Limit, P: p.Period.Microseconds(), B: p.Capacity()}
	m.T = (m.P + m.L - 1) / m.L
	m.tokens = new(big.Rat).SetInt64(m.B)
	m.span = m.B * m.T
	return m
}

// change applies policy p (same name and algorithm) from t on, as the contract's
// "Changing a policy" says: the windows and the log keep what was admitted and
// count it against the new limit; a bucket keeps its missing credit in µs,
// (B − tokens)·T, so it is full again at the same instant, and holds
// B' − missing/T' tokens of the new size — fewer than none when it shrank
// below what is missing. The leaky bucket's queue keeps its tail.
func (m *model) change(p sluice.Policy, t int64) {
	next := newModel(p)
	if m.bucket() {
		missing := new(big.Rat).Sub(new(big.Rat).SetInt64(m.B), m.tokensAt(t))
		missing.Mul(missing, new(big.Rat).SetInt64(m.T))
		missing.Quo(missing, new(big.Rat).SetInt64(next.T))
		m.tokens = missing.Sub(new(big.Rat).SetInt64(next.B), missing)
		m.tokenAt = t
	}
	m.L, m.P, m.B, m.T = next.L, next.P, next.B, next.T
	m.span = max(m.span, next.span)
}

func (m *model) bucket() bool {
	return m.alg == sluice.TokenBucket || m.alg == sluice.GCRA || m.alg == sluice.LeakyBucket
}

// sum adds the costs admitted in [from, to).
func (m *model) sum(from, to int64) int64 {
	var s int64
	for _, a := range m.hist {
		if a.t >= from && a.t < to {
			s += a.n
		}
	}
	return s
}

// tokensAt is min(B, tokens + (t − tokenAt)/T).
func (m *model) tokensAt(t int64) *big.Rat {
	r := new(big.Rat).SetFrac64(t-m.tokenAt, m.T)
	r.Add(r, m.tokens)
	if b := new(big.Rat).SetInt64(m.B); r.Cmp(b) > 0 {
		return b
	}
	return r
}

// admits reports whether n units would be admitted at t.
func (m *model) admits(t, n int64) bool {
	switch m.alg {
	case sluice.FixedWindow:
		w := t - t%m.P
		return m.sum(w, w+m.P)+n <= m.L
	case sluice.SlidingLog:
		return m.sum(t-m.P+1, t+1)+n <= m.L
	case sluice.SlidingWindow:
		w := t - t%m.P
		prev, cur := m.sum(w-m.P, w), m.sum(w, w+m.P)
		return prev*(m.P-(t-w))+(cur+n)*m.P <= m.L*m.P
	default:
		return m.tokensAt(t).Cmp(new(big.Rat).SetInt64(n)) >= 0
	}
}

// initial reports whether nothing admitted still counts at t.
func (m *model) initial(t int64) bool {
	switch m.alg {
	case sluice.FixedWindow:
		w := t - t%m.P
		return m.sum(w, w+m.P) == 0
	case sluice.SlidingLog:
		return m.sum(t-m.P+1, t+1) == 0
	case sluice.SlidingWindow:
		w := t - t%m.P
		return m.sum(w-m.P, w+m.P) == 0
	default:
		return m.tokensAt(t).Cmp(new(big.Rat).SetInt64(m.B)) == 0
	}
}

// admit records n units admitted at t and returns the leaky bucket's delay.
func (m *model) admit(t, n int64) (delay int64) {
	if m.bucket() {
		m.tokens = m.tokensAt(t).Sub(m.tokensAt(t), new(big.Rat).SetInt64(n))
		m.tokenAt = t
	}
	if n == 0 {
		return 0
	}
	m.hist = append(m.hist, admission{t, n})
	dep := max(t, m.lastEnd)
	m.lastEnd = dep + n*m.T
	return dep - t
}

// remaining is the largest m ≤ capacity admitted at t.
func (m *model) remaining(t int64) int64 {
	lo, hi := int64(0), m.B
	if !m.bucket() {
		hi = m.L
	}
	for lo < hi { // admits(t, ·) is monotone: more units never pass where fewer don't
		mid := (lo + hi + 1) / 2
		if m.admits(t, mid) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

// firstAt returns the smallest t' ≥ t with ok(t'), searching up to horizon µs
// ahead; ok must be monotone (false, then true forever) when nothing is admitted.
func firstAt(t, horizon int64, ok func(int64) bool) int64 {
	lo, hi := t, t+horizon
	for lo < hi {
		mid := lo + (hi-lo)/2
		if ok(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

func (m *model) horizon() int64 {
	if m.bucket() {
		return m.span + (m.B+1)*m.T + m.debt
	}
	return 3 * m.P
}

// retryAfter is the smallest wait after which n units are admitted.
func (m *model) retryAfter(t, n int64) int64 {
	return firstAt(t, m.horizon(), func(u int64) bool { return m.admits(u, n) }) - t
}

// resetAfter is the wait until the key is back to its initial state.
func (m *model) resetAfter(t int64) int64 {
	return firstAt(t, m.horizon(), m.initial) - t
}
