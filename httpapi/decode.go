package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Request bodies are read more strictly than encoding/json reads them, so
// that what a client meant is never guessed at:
//   - member names match exactly (encoding/json folds case: "Policy" would be
//     taken for "policy");
//   - a member given twice is refused (encoding/json keeps the last);
//   - unknown members are refused;
//   - the text is valid UTF-8 and has no lone UTF-16 surrogate escape
//     (encoding/json turns both into U+FFFD, so distinct keys would all share
//     the bucket of one key).

// member is one field of a JSON object the API accepts: its exact name and
// how to read its value.
type member struct {
	name string
	read func(dec *json.Decoder, field string) error
}

// decodeObject reads body, which must hold exactly one JSON object of the
// given members.
func decodeObject(body []byte, members ...member) error {
	if err := checkText(body); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := readObject(dec, "", "the body", members); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("the body must hold a single JSON object")
	}
	return nil
}

// readObject reads the object that is dec's next value; path is its place
// in the body ("" at the top, "checks[2]" in a list), what names it in
// messages.
func readObject(dec *json.Decoder, path, what string, members []member) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok != json.Delim('{') {
		return fmt.Errorf("%s must be a JSON object, not %s", what, kind(tok))
	}
	seen := make([]bool, len(members))
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		name, ok := tok.(string)
		if !ok { // the decoder reports a bad name as a syntax error; just in case
			return fmt.Errorf("%s has a member name that is not a string", what)
		}
		i := memberIndex(members, name)
		switch {
		case i >= 0 && seen[i]:
			return fmt.Errorf("field %q is given twice", fieldPath(path, name))
		case i >= 0:
			seen[i] = true
			if err := members[i].read(dec, fieldPath(path, name)); err != nil {
				return err
			}
			continue
		}
		for _, m := range members {
			if strings.EqualFold(m.name, name) {
				return fmt.Errorf("unknown field %q: field names are case-sensitive; did you mean %q?",
					fieldPath(path, truncate(name, 100)), m.name)
			}
		}
		return fmt.Errorf("unknown field %q", fieldPath(path, truncate(name, 100)))
	}
	_, err = dec.Token() // the closing brace
	return err
}

func memberIndex(members []member, name string) int {
	for i, m := range members {
		if m.name == name {
			return i
		}
	}
	return -1
}

func fieldPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// kind names the JSON value a token starts, for messages.
func kind(tok json.Token) string {
	switch v := tok.(type) {
	case json.Delim:
		if v == '[' {
			return "a list"
		}
		return "an object"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "true or false"
	}
	return "null"
}

// stringMember reads a string into p; null leaves p as it is (absent).
func stringMember(name string, p *string) member {
	return member{name, func(dec *json.Decoder, field string) error {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch v := tok.(type) {
		case string:
			*p = v
			return nil
		case nil:
			return nil
		}
		return fmt.Errorf("%s must be a string, not %s", field, kind(tok))
	}}
}

// integerMember reads an integer into *p; null leaves *p nil (absent).
func integerMember(name string, p **int64) member {
	return member{name, func(dec *json.Decoder, field string) error {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch v := tok.(type) {
		case json.Number:
			n, err := strconv.ParseInt(v.String(), 10, 64)
			if errors.Is(err, strconv.ErrRange) {
				return fmt.Errorf("%s must be an integer that fits in 64 bits, not %s", field, truncate(v.String(), 40))
			}
			if err != nil {
				return fmt.Errorf("%s must be an integer, not %s", field, truncate(v.String(), 40))
			}
			*p = &n
			return nil
		case nil:
			return nil
		}
		return fmt.Errorf("%s must be an integer, not %s", field, kind(tok))
	}}
}

// checkText refuses a body that is not valid UTF-8 or that escapes half of
// a UTF-16 surrogate pair in a string: both would decode to U+FFFD.
func checkText(body []byte) error {
	if !utf8.Valid(body) {
		at := 0
		for at < len(body) {
			r, size := utf8.DecodeRune(body[at:])
			if r == utf8.RuneError && size <= 1 {
				break
			}
			at += size
		}
		return fmt.Errorf("the body is not valid UTF-8 (byte %d); keys are compared byte for byte, so send text as UTF-8", at)
	}
	inString := false
	for i := 0; i < len(body); i++ {
		switch c := body[i]; {
		case !inString:
			inString = c == '"'
		case c == '"':
			inString = false
		case c == '\\':
			if i+1 < len(body) && body[i+1] == 'u' {
				n, err := surrogateEscape(body, i)
				if err != nil {
					return err
				}
				i += n
			}
			i++ // the escaped character
		}
	}
	return nil
}

// surrogateEscape looks at the \uXXXX escape at body[i:]: it returns how
// many bytes to skip beyond the usual two when it starts a valid surrogate
// pair (the pair's second escape), and an error for half a pair.
func surrogateEscape(body []byte, i int) (int, error) {
	r, ok := hex4(body, i+2)
	if !ok || !utf16.IsSurrogate(r) {
		return 0, nil // an ordinary escape, or a syntax error the decoder reports
	}
	if r < 0xdc00 { // a high surrogate: a low one must follow
		if i+7 < len(body) && body[i+6] == '\\' && body[i+7] == 'u' {
			if lo, ok := hex4(body, i+8); ok && lo >= 0xdc00 && lo <= 0xdfff {
				return 6, nil
			}
		}
	}
	return 0, fmt.Errorf("invalid JSON at byte %d: \\u%04x is half of a UTF-16 surrogate pair, which is no character", i, r)
}

// hex4 parses the four hex digits at body[i:].
func hex4(body []byte, i int) (rune, bool) {
	if i+4 > len(body) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(body[i:i+4]), 16, 32)
	return rune(n), err == nil
}
