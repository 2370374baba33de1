package pay

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"

	"payserver/internal/apperr"
)

// Reasons given for what encoding/json lets through silently.
const (
	reasonDuplicateKey  = "duplicate key: each key may appear only once"
	reasonInvalidUTF8   = "must be valid UTF-8"
	reasonLoneSurrogate = "must be valid UTF-8: has a lone surrogate escape (a \\uD800-\\uDBFF escape must be followed by a \\uDC00-\\uDFFF one)"
	// maxFieldPathLen bounds a nested field's path in an answer; a longer
	// one is reported as "body".
	maxFieldPathLen = 128
)

// strictJSONProblems reports what encoding/json accepts in a valid JSON text
// but a payment must not: a key repeated in one object, at any depth
// (encoding/json keeps the last value, while a gateway that reads the first
// sees another payment), and strings, keys or values, holding invalid UTF-8
// or a lone UTF-16 surrogate escape such as \ud800 (encoding/json turns both
// into U+FFFD). Each problem names its field: the member name at the top
// level, a path such as x.a or x[1].b below it, or "body" for a name that
// cannot be shown. data must be valid JSON (json.Valid); on anything else
// the result is meaningless but the function still returns.
//
// It is one pass over the bytes, and allocates only for escaped keys,
// objects of more than smallObject keys, and problems.
func strictJSONProblems(data []byte) []apperr.FieldError {
	s := strictScanner{data: data}
	s.scan()
	return s.problems
}

// smallObject is the number of keys an object's duplicate check compares
// one by one; larger objects use a map.
const smallObject = 16

type jsonFrame struct {
	object    bool
	expectKey bool     // in an object: the next string is a key
	index     int      // in an array: the current element
	key       []byte   // in an object: the current member's decoded name
	keyOK     bool     // key is a name that can be shown
	seen      [][]byte // keys so far, while there are at most smallObject
	seenSet   map[string]struct{}
}

type strictScanner struct {
	data     []byte
	stack    []jsonFrame
	problems []apperr.FieldError
}

func (s *strictScanner) scan() {
	var frames [4]jsonFrame
	s.stack = frames[:0]
	for i := 0; i < len(s.data); i++ {
		switch s.data[i] {
		case '{':
			s.stack = append(s.stack, jsonFrame{object: true, expectKey: true})
		case '[':
			s.stack = append(s.stack, jsonFrame{})
		case '}', ']':
			if len(s.stack) > 0 {
				s.stack = s.stack[:len(s.stack)-1]
			}
		case ',':
			if top := s.top(); top != nil {
				if top.object {
					top.expectKey = true
				} else {
					top.index++
				}
			}
		case '"':
			end, bad := s.scanString(i)
			if top := s.top(); top != nil && top.object && top.expectKey {
				top.expectKey = false
				s.member(i, end, bad)
			} else if bad != "" {
				s.report(s.path(), bad)
			}
			i = end
		}
	}
}

func (s *strictScanner) top() *jsonFrame {
	if len(s.stack) == 0 {
		return nil
	}
	return &s.stack[len(s.stack)-1]
}

// member records the key data[start:end+1] (quotes included) of the top
// object and reports it if repeated or badly encoded.
func (s *strictScanner) member(start, end int, bad string) {
	top := s.top()
	top.key, top.keyOK = nil, false
	if bad != "" {
		s.report("body", "has a key that is not valid UTF-8")
		return
	}
	raw := s.data[start+1 : end]
	name := raw
	if bytes.IndexByte(raw, '\\') >= 0 {
		var decoded string
		if json.Unmarshal(s.data[start:end+1], &decoded) != nil {
			return
		}
		name = []byte(decoded)
	}
	top.key, top.keyOK = name, nameable(name)
	if top.repeated(name) {
		s.report(s.path(), reasonDuplicateKey)
	}
}

// repeated reports whether the object already has name, and records it.
func (f *jsonFrame) repeated(name []byte) bool {
	if f.seenSet != nil {
		if _, ok := f.seenSet[string(name)]; ok {
			return true
		}
		f.seenSet[string(name)] = struct{}{}
		return false
	}
	for _, k := range f.seen {
		if bytes.Equal(k, name) {
			return true
		}
	}
	if len(f.seen) == smallObject {
		f.seenSet = make(map[string]struct{}, 2*smallObject)
		for _, k := range f.seen {
			f.seenSet[string(k)] = struct{}{}
		}
		f.seenSet[string(name)] = struct{}{}
		f.seen = nil
		return false
	}
	f.seen = append(f.seen, name)
	return false
}

// nameable reports whether a key may be shown in an answer as a field name.
func nameable(name []byte) bool {
	if len(name) == 0 || len(name) > MaxRequestIDLen || !utf8.Valid(name) {
		return false
	}
	for _, c := range name {
		if c < 0x20 || c == 0x7f {
			return false
		}
	}
	return true
}

// path names the value being scanned: its member names and array indexes
// from the top-level object down, or "body" when a name cannot be shown or
// the path is too long.
func (s *strictScanner) path() string {
	var b strings.Builder
	for i, f := range s.stack {
		if i == 0 && !f.object {
			return "body" // a top-level array is refused anyway
		}
		if f.object {
			if !f.keyOK {
				return "body"
			}
			if i > 0 {
				b.WriteByte('.')
			}
			b.Write(f.key)
		} else {
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(f.index))
			b.WriteByte(']')
		}
		if b.Len() > maxFieldPathLen {
			return "body"
		}
	}
	if b.Len() == 0 {
		return "body"
	}
	return b.String()
}

func (s *strictScanner) report(field, reason string) {
	s.problems = append(s.problems, apperr.FieldError{Field: field, Reason: reason})
}

// scanString scans the string whose opening quote is at data[start]. It
// returns the index of the closing quote and, when the string holds invalid
// UTF-8 or a lone surrogate escape, the reason.
func (s *strictScanner) scanString(start int) (end int, bad string) {
	d := s.data
	for i := start + 1; i < len(d); {
		c := d[i]
		switch {
		case c == '"':
			return i, bad
		case c == '\\':
			if i+1 < len(d) && d[i+1] == 'u' {
				r, ok := hex4(d, i+2)
				switch {
				case !ok:
				case r >= 0xD800 && r <= 0xDBFF:
					if low, ok := hex4(d, i+8); ok && i+7 < len(d) && d[i+6] == '\\' && d[i+7] == 'u' && low >= 0xDC00 && low <= 0xDFFF {
						i += 12
						continue
					}
					if bad == "" {
						bad = reasonLoneSurrogate
					}
				case r >= 0xDC00 && r <= 0xDFFF:
					if bad == "" {
						bad = reasonLoneSurrogate
					}
				}
				i += 6
				continue
			}
			i += 2
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(d[i:])
			if r == utf8.RuneError && size == 1 && bad == "" {
				bad = reasonInvalidUTF8
			}
			i += size
		}
	}
	return len(d), bad
}

// hex4 reads the four hex digits at data[i:i+4].
func hex4(data []byte, i int) (rune, bool) {
	if i < 0 || i+4 > len(data) {
		return 0, false
	}
	var r rune
	for _, c := range data[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}
