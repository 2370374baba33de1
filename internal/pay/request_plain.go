package pay

import (
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// maxPlainBody is the largest body the one-pass decode takes. Its fields
// are substrings of one copy of the body, which they keep alive; a larger
// body (a valid one is at most about 1 KB without padding) is decoded
// field by field, which copies each field.
const maxPlainBody = 2 << 10

// The members of a POST /pay body, as bits of decodePlainPayRequest's seen.
const (
	plainRequestID = 1 << iota
	plainBizType
	plainChannel
	plainMerchantID
	plainAmount
	plainCurrency
	plainSubject
	plainMaxWait

	plainRequired = plainRequestID | plainBizType | plainMerchantID | plainAmount | plainCurrency
)

// decodePlainPayRequest decodes, in one pass over data and with two
// allocations (the body's copy, and one for the fields that outlive it), a
// body that is plain: one JSON object whose members are distinct known
// fields, each written without escapes, whose string values are valid UTF-8
// without escapes and whose numbers are integers without a fraction or
// exponent, and which passes every rule of the contract. It reports ok
// false for anything else, valid or not, and decides nothing then: the caller decodes the body field by field, which words every
// refusal. What it accepts the field-by-field decode accepts as the same
// request (FuzzPlainDecodeAgrees).
func decodePlainPayRequest(data []byte) (PayRequest, bool) {
	var r PayRequest
	if len(data) > maxPlainBody {
		return r, false
	}
	// One copy of the body; the fields are substrings of it.
	text := string(data)
	i := skipJSONSpace(text, 0)
	if i >= len(text) || text[i] != '{' {
		return r, false
	}
	seen := 0
	var maxWaitMs int64
	for {
		i = skipJSONSpace(text, i+1)
		name, next, ok := plainJSONString(text, i)
		if !ok {
			return r, false
		}
		i = skipJSONSpace(text, next)
		if i >= len(text) || text[i] != ':' {
			return r, false
		}
		i = skipJSONSpace(text, i+1)
		var field int
		var dst *string
		switch name {
		case "requestId":
			field, dst = plainRequestID, &r.RequestID
		case "bizType":
			field, dst = plainBizType, &r.BizType
		case "channel":
			field, dst = plainChannel, &r.Channel
		case "merchantId":
			field, dst = plainMerchantID, &r.MerchantID
		case "currency":
			field, dst = plainCurrency, &r.Currency
		case "subject":
			field, dst = plainSubject, &r.Subject
		case "amount":
			field = plainAmount
		case "maxWaitMs":
			field = plainMaxWait
		default:
			return r, false
		}
		if seen&field != 0 {
			return r, false
		}
		seen |= field
		switch {
		case dst != nil:
			*dst, next, ok = plainJSONString(text, i)
		case field == plainAmount:
			r.Amount, next, ok = plainJSONInt(text, i)
		default:
			maxWaitMs, next, ok = plainJSONInt(text, i)
		}
		if !ok {
			return r, false
		}
		i = skipJSONSpace(text, next)
		if i >= len(text) {
			return r, false
		}
		if text[i] == '}' {
			break
		}
		if text[i] != ',' {
			return r, false
		}
	}
	if skipJSONSpace(text, i+1) != len(text) || seen&plainRequired != plainRequired {
		return r, false
	}
	if maxWaitMs < 0 || maxWaitMs > MaxWaitMsCap {
		return r, false
	}
	r.MaxWait = time.Duration(maxWaitMs) * time.Millisecond
	if len(r.problems(nil)) > 0 {
		return r, false
	}
	// requestId, bizType and channel outlive the request (the limiter's
	// members, metric labels, limiter and route maps): give them one copy
	// of their own, so that they do not keep the whole body alive. (A
	// strings.Builder, not +: a concatenation with empty operands returns
	// a substring itself.)
	var b strings.Builder
	b.Grow(len(r.RequestID) + len(r.BizType) + len(r.Channel))
	b.WriteString(r.RequestID)
	b.WriteString(r.BizType)
	b.WriteString(r.Channel)
	own := b.String()
	i, j := len(r.RequestID), len(r.RequestID)+len(r.BizType)
	r.RequestID, r.BizType, r.Channel = own[:i], own[i:j], own[j:]
	return r, true
}

// skipJSONSpace returns the index of the first byte at or after i that is
// not JSON white space.
func skipJSONSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

// plainJSONString reads the JSON string that starts at s[i] and returns its
// value and the index after its closing quote; ok is false unless it is
// there, holds no escape and no control character, and is valid UTF-8.
func plainJSONString(s string, i int) (v string, next int, ok bool) {
	if i >= len(s) || s[i] != '"' {
		return "", i, false
	}
	ascii := true
	for j := i + 1; j < len(s); j++ {
		switch c := s[j]; {
		case c == '"':
			v = s[i+1 : j]
			if !ascii && !utf8.ValidString(v) {
				return "", j, false
			}
			return v, j + 1, true
		case c == '\\' || c < 0x20:
			return "", j, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return "", len(s), false
}

// plainJSONInt reads the JSON integer -?(0|[1-9][0-9]*) that starts at s[i]
// and returns it and the index after it; ok is false unless it is there,
// fits an int64 and is followed by neither a fraction nor an exponent.
func plainJSONInt(s string, i int) (n int64, next int, ok bool) {
	j := i
	if j < len(s) && s[j] == '-' {
		j++
	}
	start := j
	for j < len(s) && s[j] >= '0' && s[j] <= '9' {
		j++
	}
	digits := j - start
	if digits == 0 || digits > 1 && s[start] == '0' {
		return 0, j, false
	}
	if j < len(s) && (s[j] == '.' || s[j] == 'e' || s[j] == 'E') {
		return 0, j, false
	}
	n, err := strconv.ParseInt(s[i:j], 10, 64)
	return n, j, err == nil
}
