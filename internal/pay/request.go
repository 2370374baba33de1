package pay

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"
	"unicode/utf8"

	"payserver/internal/apperr"
	"payserver/internal/ratelimit"
)

// Request field bounds, from the API contract.
const (
	MaxRequestIDLen  = 64
	MaxMerchantIDLen = 64
	MaxSubjectLen    = 128
	MaxAmount        = 1_000_000_000_000
)

// PayRequest is a validated POST /pay body.
type PayRequest struct {
	RequestID string
	BizType   string
	// Channel pins the payment to one channel; "" routes it by its
	// bizType's route (route.go).
	Channel    string
	MerchantID string
	Amount     int64 // minor units
	Currency   string
	Subject    string
	// MaxWait is how long a refused request may wait for a slot
	// (maxWaitMs); 0 means none. It is not part of the payload's Hash.
	MaxWait time.Duration
	// holding keeps the request in the ledger's log of admissions in
	// flight (Ledger.inFlight's hold); the limiter calls it before it can
	// hold a slot (ratelimit.Request.Holding). Nil: nothing is kept.
	holding *holding
}

// holding is a hold of Ledger.inFlight, behind a pointer so that a
// PayRequest stays comparable.
type holding struct{ keep func() }

// fn is h's func for ratelimit.Request.Holding: nil for no hold.
func (h *holding) fn() func() {
	if h == nil {
		return nil
	}
	return h.keep
}

// Key returns the limiter key of the request.
func (r PayRequest) Key() ratelimit.Key {
	return ratelimit.Key{BizType: r.BizType, Channel: r.Channel}
}

// Hash fingerprints everything but the requestId, so that a replay with the
// same requestId and another payload is detected. The channel is part of
// it as the client sent it: "" for a routed payment, whichever channel it
// went to, so that a retry without a channel matches its stored order and
// a retry pinned to a channel does not.
func (r PayRequest) Hash() string {
	var amount [20]byte
	var buf [256]byte
	text := buf[:0]
	for _, s := range [...]string{r.BizType, r.Channel, r.MerchantID, string(strconv.AppendInt(amount[:0], r.Amount, 10)), r.Currency, r.Subject} {
		// Length-prefixed ("%d:%s;"), so no two payloads hash the same text.
		text = strconv.AppendInt(text, int64(len(s)), 10)
		text = append(text, ':')
		text = append(text, s...)
		text = append(text, ';')
	}
	sum := sha256.Sum256(text)
	return hex.EncodeToString(sum[:])
}

var payFields = map[string]bool{
	"requestId": true, "bizType": true, "channel": true, "merchantId": true,
	"amount": true, "currency": true, "subject": true, "maxWaitMs": true,
}

// DecodePayRequest parses and validates a POST /pay body. Every problem is
// reported, field by field, in one apperr.InvalidRequest error: malformed
// JSON, keys repeated at any depth, invalid UTF-8 or lone surrogate escapes
// in any string, unknown fields, missing or mistyped fields, and values out
// of range. Reasons are plain words, never Go's. It never panics, whatever
// data holds.
//
// A plain, valid body (request_plain.go) is decoded in one pass over its
// bytes; anything else, and every body that would be refused, goes through
// the field-by-field decode, which alone words the refusals.
func DecodePayRequest(data []byte) (PayRequest, error) {
	if r, ok := decodePlainPayRequest(data); ok {
		return r, nil
	}
	return decodePayRequestFields(data)
}

// decodePayRequestFields is DecodePayRequest for any body: it decodes the
// JSON into its members, checks the raw text for what encoding/json lets
// through (json_strict.go), and lists every problem.
func decodePayRequestFields(data []byte) (PayRequest, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil || raw == nil {
		return PayRequest{}, apperr.Invalid(apperr.FieldError{Field: "body", Reason: BodyProblem(err)})
	}
	bad := strictJSONProblems(data)
	unknown := make([]string, 0)
	for name := range raw {
		if !payFields[name] {
			unknown = append(unknown, name)
		}
	}
	sort.Strings(unknown)
	for _, name := range unknown {
		if !nameable([]byte(name)) {
			bad = append(bad, apperr.FieldError{Field: "body", Reason: "has an unknown field with an empty, over-long or unprintable name"})
			continue
		}
		bad = append(bad, apperr.FieldError{Field: name, Reason: "unknown field"})
	}
	var r PayRequest
	str := func(name string, dst *string, required bool) {
		v, ok := raw[name]
		if !ok || string(v) == "null" {
			if required {
				bad = append(bad, apperr.FieldError{Field: name, Reason: "is required"})
			}
			return
		}
		if len(v) >= 2 && v[0] == '"' && bytes.IndexByte(v, '\\') < 0 {
			// A valid JSON string without escapes is its bytes between the
			// quotes (its UTF-8 was checked above): no second decode.
			*dst = string(v[1 : len(v)-1])
			return
		}
		if err := json.Unmarshal(v, dst); err != nil {
			bad = append(bad, apperr.FieldError{Field: name, Reason: "must be a string"})
		}
	}
	str("requestId", &r.RequestID, true)
	str("bizType", &r.BizType, true)
	str("channel", &r.Channel, false) // absent or "": routed (route.go)
	str("merchantId", &r.MerchantID, true)
	str("currency", &r.Currency, true)
	str("subject", &r.Subject, false)
	if v, ok := raw["amount"]; !ok || string(v) == "null" {
		bad = append(bad, apperr.FieldError{Field: "amount", Reason: "is required"})
	} else if n, reason := ParseAmount(string(bytes.TrimSpace(v))); reason != "" {
		bad = append(bad, apperr.FieldError{Field: "amount", Reason: reason})
	} else {
		r.Amount = n
	}
	if d, reason := ParseMaxWaitMs(raw["maxWaitMs"]); reason != "" {
		bad = append(bad, apperr.FieldError{Field: "maxWaitMs", Reason: reason})
	} else {
		r.MaxWait = d
	}
	bad = append(bad, r.problems(bad)...)
	if len(bad) > 0 {
		return PayRequest{}, apperr.Invalid(bad...)
	}
	return r, nil
}

// problems validates values of fields that decoded; fields already in
// decoded are skipped.
func (r PayRequest) problems(decoded []apperr.FieldError) []apperr.FieldError {
	skip := map[string]bool{}
	for _, f := range decoded {
		skip[f.Field] = true
	}
	var bad []apperr.FieldError
	add := func(field, reason string) {
		if !skip[field] && reason != "" {
			bad = append(bad, apperr.FieldError{Field: field, Reason: reason})
		}
	}
	add("requestId", requestIDProblem(r.RequestID))
	add("bizType", ratelimit.BizTypeProblem(r.BizType))
	if r.Channel != "" {
		add("channel", ratelimit.CodeProblem(r.Channel))
	}
	// Invalid UTF-8 and lone surrogates never get here: encoding/json would
	// have replaced them with U+FFFD, so strictJSONProblems refuses them in
	// the raw body.
	switch n := utf8.RuneCountInString(r.MerchantID); {
	case n < 1 || n > MaxMerchantIDLen:
		add("merchantId", fmt.Sprintf("must be 1..%d characters", MaxMerchantIDLen))
	case hasControl(r.MerchantID):
		add("merchantId", "must not contain control characters")
	}
	add("amount", AmountProblem(r.Amount))
	if _, ok := CurrencyExponent(r.Currency); !ok {
		add("currency", "must be an active ISO 4217 currency code in upper case, such as CNY (not XXX, XTS, a precious metal or a fund code)")
	}
	switch {
	case utf8.RuneCountInString(r.Subject) > MaxSubjectLen:
		add("subject", fmt.Sprintf("must be at most %d characters", MaxSubjectLen))
	case hasControl(r.Subject):
		add("subject", "must not contain control characters")
	}
	return bad
}

// ValidRequestID reports whether s may be a requestId: 1..64 characters of
// [A-Za-z0-9._:-].
func ValidRequestID(s string) bool { return requestIDProblem(s) == "" }

func requestIDProblem(s string) string {
	if len(s) < 1 || len(s) > MaxRequestIDLen {
		return fmt.Sprintf("must be 1..%d characters", MaxRequestIDLen)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-') {
			return "must contain only A-Z, a-z, 0-9 and . _ : -"
		}
	}
	return ""
}

func hasControl(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return true
		}
	}
	return false
}

// PeekRequestID returns the body's requestId if it is a valid one, for
// echoing in error answers; otherwise "" (also when the body repeats a key
// or holds badly encoded text, so that no ambiguous requestId is echoed).
func PeekRequestID(data []byte) string {
	var v struct {
		RequestID any `json:"requestId"`
	}
	if json.Unmarshal(data, &v) != nil || len(strictJSONProblems(data)) > 0 {
		return ""
	}
	if s, ok := v.RequestID.(string); ok && ValidRequestID(s) {
		return s
	}
	return ""
}

// BodyProblem says in plain words why a request body did not decode as a
// JSON object; err is what json.Unmarshal returned (nil for a JSON null).
// It never shows Go's type names.
func BodyProblem(err error) string {
	var syntax *json.SyntaxError
	switch {
	case err == nil:
		return "must be a JSON object"
	case errors.As(err, &syntax):
		return fmt.Sprintf("is not valid JSON: %s (at byte %d)", syntax.Error(), syntax.Offset)
	default:
		// *json.UnmarshalTypeError: valid JSON, but not an object.
		return "must be a JSON object"
	}
}
