package overrides

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"time"
)

// How an override is kept in Redis: one field of one hash, "<policy>
// <target>" (a policy name holds no space), whose value is the expiry as 20
// digits of Unix microseconds (neverExpires when it has none) followed by
// the rest as JSON. The fixed-width expiry lets the scripts find an
// override's entry in the per-policy index, ordered by expiry, without
// decoding JSON or trusting a float's digits.

// expiryLen is the width of a value's expiry.
const expiryLen = 20

// neverExpires stands for no expiry: it sorts after every 20-digit time,
// byte by byte, and is no number to Lua's tonumber.
var neverExpires = strings.Repeat("~", expiryLen)

// stored is the JSON part of an override's value.
type stored struct {
	Limit     int64  `json:"limit"`
	PeriodUS  int64  `json:"period_us"`
	Burst     int64  `json:"burst,omitempty"`
	Reason    string `json:"reason,omitempty"`
	UpdatedUS int64  `json:"updated_us"`
}

// fieldOf is o's field in the overrides hash.
func fieldOf(policy, target string) string { return policy + " " + target }

// expiryOf is t as a value's expiry.
func expiryOf(t time.Time) string {
	if t.IsZero() {
		return neverExpires
	}
	return micros(t)
}

// micros is t in Unix microseconds, 20 digits, zero-padded: the scripts
// compare times as strings of one width. Times before 1970 are 0.
func micros(t time.Time) string {
	us := max(t.UnixMicro(), 0)
	s := strconv.FormatInt(us, 10)
	return strings.Repeat("0", expiryLen-len(s)) + s
}

// encodeValue is o's value in the overrides hash.
func encodeValue(o *Override) string {
	body, _ := json.Marshal(stored{Limit: o.Limit, PeriodUS: o.Period.Microseconds(), Burst: o.Burst,
		Reason: o.Reason, UpdatedUS: o.UpdatedAt.UnixMicro()})
	return expiryOf(o.ExpiresAt) + string(body)
}

// decodeField reads a field of the overrides hash into an Override naming
// its policy and target; false for one that is not an override's.
func decodeField(field string) (Override, bool) {
	policy, target, ok := strings.Cut(field, " ")
	if !ok || policy == "" {
		return Override{}, false
	}
	o := Override{Policy: policy}
	switch kind, name, _ := strings.Cut(target, ":"); {
	case kind == "k" && name != "":
		o.Key = name
	case kind == "p" && name != "":
		o.Prefix = name
	default:
		return Override{}, false
	}
	return o, true
}

// decodeEntry reads one field and value of the overrides hash; false for
// one this version cannot read (it is skipped, not fatal: one bad entry must
// not drop every override).
func decodeEntry(field, value string) (Override, bool) {
	o, ok := decodeField(field)
	if !ok || len(value) < expiryLen {
		return Override{}, false
	}
	if e := value[:expiryLen]; e != neverExpires {
		us, err := strconv.ParseInt(e, 10, 64)
		if err != nil || us <= 0 {
			return Override{}, false
		}
		o.ExpiresAt = time.UnixMicro(us)
	}
	var v stored
	if json.Unmarshal([]byte(value[expiryLen:]), &v) != nil || v.PeriodUS <= 0 || v.PeriodUS > math.MaxInt64/1000 {
		return Override{}, false
	}
	o.Limit, o.Period, o.Burst = v.Limit, time.Duration(v.PeriodUS)*time.Microsecond, v.Burst
	o.Reason, o.UpdatedAt = v.Reason, time.UnixMicro(v.UpdatedUS)
	return o, true
}
