package storestack

import (
	"errors"
	"net/url"
	"strings"
)

// RedactURL returns raw with its password hidden, for logs and errors.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	q := u.Query()
	if shards := q["shard"]; len(shards) > 0 { // a sharded store: each may hold a password
		for i, s := range shards {
			shards[i] = RedactURL(s)
		}
		u.RawQuery = q.Encode()
		raw = u.String()
	}
	if u.User == nil {
		return raw
	}
	return u.Redacted()
}

// Redact removes the passwords of the URL raw (and of its shards) from err's
// text, in case a library quoted the URL.
func Redact(err error, raw string) error {
	u, perr := url.Parse(raw)
	if perr != nil {
		return err
	}
	msg := err.Error()
	for _, s := range u.Query()["shard"] {
		msg = Redact(errors.New(msg), s).Error()
	}
	if u.User != nil {
		if pass, ok := u.User.Password(); ok && pass != "" {
			msg = strings.ReplaceAll(msg, pass, "xxxxx")
		}
	}
	if msg == err.Error() {
		return err
	}
	return errors.New(msg)
}
