package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
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
//
// decodeStrict checks all that, and every value's type, in one pass over
// the bytes, and only then lets encoding/json fill the structs: the bodies
// it accepts are exactly those encoding/json reads without guessing.

// valueKind is the type of JSON value a field takes.
type valueKind int

const (
	kindString  valueKind = iota
	kindInteger           // an integer that fits in an int64
	kindObjects           // a list of objects of the field's inner fields
)

// field is one member of a JSON object the API accepts. A field may always
// be null, which is the same as leaving it out.
type field struct {
	name  string
	kind  valueKind
	inner []field // kindObjects: the fields of each object
}

// decodeStrict checks that body holds exactly one JSON object of fields,
// then decodes it into v (a pointer to a struct whose json tags name the
// same fields).
func decodeStrict(body []byte, fields []field, v any) error {
	if err := checkText(body); err != nil {
		return err
	}
	if !json.Valid(body) {
		// Let the decoder say what is wrong and where.
		var first any
		dec := json.NewDecoder(bytes.NewReader(body))
		if err := dec.Decode(&first); err != nil {
			return err
		}
		return errors.New("the body must hold a single JSON object")
	}
	s := scanner{b: body}
	if err := s.object(place{}, fields); err != nil {
		return err
	}
	return json.Unmarshal(body, v)
}

// scanner walks a body that is valid JSON (json.Valid said so), checking it
// against the fields.
type scanner struct {
	b []byte
	i int
}

// next skips white space and returns the byte that starts the next token.
func (s *scanner) next() byte {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return s.b[s.i]
		}
	}
	return 0
}

// place is where an object stands in the body: at the top, or item index
// of the list field list. Names are only built for messages.
type place struct {
	list  string
	index int
}

func (p place) String() string {
	if p.list == "" {
		return "the body"
	}
	return fmt.Sprintf("%s[%d]", p.list, p.index)
}

// field names a field of the object at p.
func (p place) field(name string) string {
	if p.list == "" {
		return name
	}
	return p.String() + "." + name
}

// object checks the object that starts at the next token, at p.
func (s *scanner) object(p place, fields []field) error {
	if c := s.next(); c != '{' {
		return fmt.Errorf("%s must be a JSON object, not %s", p, kindOf(c))
	}
	s.i++
	var seen uint64 // bit j: fields[j] was given
	for s.next() != '}' {
		if s.b[s.i] == ',' {
			s.i++
			s.next()
		}
		start := s.i
		raw := s.stringBody()
		j := fieldIndex(fields, raw)
		if j < 0 {
			var name string
			_ = json.Unmarshal(s.b[start:s.i], &name) // valid JSON: a string
			return unknownField(p.field(name), fields)
		}
		if seen&(1<<j) != 0 {
			return fmt.Errorf("field %q is given twice", p.field(fields[j].name))
		}
		seen |= 1 << j
		s.next()
		s.i++ // the colon
		if err := s.value(p, &fields[j]); err != nil {
			return err
		}
	}
	s.i++
	return nil
}

// fieldIndex finds the field named raw (a member name as it is written);
// a name with escapes is decoded first.
func fieldIndex(fields []field, raw []byte) int {
	if bytes.IndexByte(raw, '\\') >= 0 { // rare: decode the escapes
		var name string
		_ = json.Unmarshal(append(append([]byte{'"'}, raw...), '"'), &name)
		raw = []byte(name)
	}
	for j := range fields {
		if string(raw) == fields[j].name { // compared without a copy
			return j
		}
	}
	return -1
}

func unknownField(name string, fields []field) error {
	name = truncate(name, 100)
	for _, f := range fields {
		if len(f.name) == len(name) && bytes.EqualFold([]byte(f.name), []byte(name)) {
			return fmt.Errorf("unknown field %q: field names are case-sensitive; did you mean %q?", name, f.name)
		}
	}
	return fmt.Errorf("unknown field %q", name)
}

// value checks the value of field f of the object at p.
func (s *scanner) value(p place, f *field) error {
	name := func() string { return p.field(f.name) }
	c := s.next()
	if c == 'n' { // null: as if absent
		s.i += len("null")
		return nil
	}
	switch f.kind {
	case kindString:
		if c != '"' {
			return fmt.Errorf("%s must be a string, not %s", name(), kindOf(c))
		}
		s.stringBody()
	case kindInteger:
		if c != '-' && (c < '0' || c > '9') {
			return fmt.Errorf("%s must be an integer, not %s", name(), kindOf(c))
		}
		start := s.i
		for s.i < len(s.b) && strings.IndexByte("+-.eE0123456789", s.b[s.i]) >= 0 {
			s.i++
		}
		text := s.b[start:s.i]
		if _, err := strconv.ParseInt(string(text), 10, 64); errors.Is(err, strconv.ErrRange) {
			return fmt.Errorf("%s must be an integer that fits in 64 bits, not %s", name(), truncate(string(text), 40))
		} else if err != nil {
			return fmt.Errorf("%s must be an integer, not %s", name(), truncate(string(text), 40))
		}
	case kindObjects:
		if c != '[' {
			return fmt.Errorf("%s must be a list of objects, not %s", name(), kindOf(c))
		}
		s.i++
		for n := 0; s.next() != ']'; n++ {
			if s.b[s.i] == ',' {
				s.i++
			}
			if err := s.object(place{p.field(f.name), n}, f.inner); err != nil {
				return err
			}
		}
		s.i++
	}
	return nil
}

// stringBody steps over the string at s.i and returns what is between its
// quotes, escapes as they are written.
func (s *scanner) stringBody() []byte {
	s.i++ // the opening quote
	start := s.i
	for s.b[s.i] != '"' {
		if s.b[s.i] == '\\' {
			s.i++
		}
		s.i++
	}
	s.i++
	return s.b[start : s.i-1]
}

// kindOf names the JSON value that starts with c, for messages.
func kindOf(c byte) string {
	switch c {
	case '{':
		return "an object"
	case '[':
		return "a list"
	case '"':
		return "a string"
	case 't', 'f':
		return "true or false"
	case 'n':
		return "null"
	}
	return "a number"
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
