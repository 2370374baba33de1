package pay

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
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
	RequestID  string
	BizType    string
	Channel    string
	MerchantID string
	Amount     int64 // minor units
	Currency   string
	Subject    string
}

// Key returns the limiter key of the request.
func (r PayRequest) Key() ratelimit.Key {
	return ratelimit.Key{BizType: r.BizType, Channel: r.Channel}
}

// Hash fingerprints everything but the requestId, so that a replay with the
// same requestId and another payload is detected.
func (r PayRequest) Hash() string {
	h := sha256.New()
	for _, s := range []string{r.BizType, r.Channel, r.MerchantID, strconv.FormatInt(r.Amount, 10), r.Currency, r.Subject} {
		// Length-prefixed, so no two payloads hash the same text.
		fmt.Fprintf(h, "%d:%s;", len(s), s)
	}
	return hex.EncodeToString(h.Sum(nil))
}

var payFields = map[string]bool{
	"requestId": true, "bizType": true, "channel": true, "merchantId": true,
	"amount": true, "currency": true, "subject": true,
}

// DecodePayRequest parses and validates a POST /pay body. Every problem is
// reported, field by field, in one apperr.InvalidRequest error: malformed
// JSON, unknown fields, missing or mistyped fields, and values out of range.
// It never panics, whatever data holds.
func DecodePayRequest(data []byte) (PayRequest, error) {
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&raw); err != nil || raw == nil {
		reason := "must be a JSON object"
		if err != nil {
			reason = "malformed JSON: " + err.Error()
		}
		return PayRequest{}, apperr.Invalid(apperr.FieldError{Field: "body", Reason: reason})
	}
	if dec.More() {
		return PayRequest{}, apperr.Invalid(apperr.FieldError{Field: "body", Reason: "must hold exactly one JSON object"})
	}
	var bad []apperr.FieldError
	unknown := make([]string, 0)
	for name := range raw {
		if !payFields[name] {
			unknown = append(unknown, name)
		}
	}
	sort.Strings(unknown)
	for _, name := range unknown {
		if name == "" || len(name) > 64 || !utf8.ValidString(name) {
			bad = append(bad, apperr.FieldError{Field: "body", Reason: "has an unknown field with an empty, over-long or invalid name"})
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
		if err := json.Unmarshal(v, dst); err != nil {
			bad = append(bad, apperr.FieldError{Field: name, Reason: "must be a string"})
		}
	}
	str("requestId", &r.RequestID, true)
	str("bizType", &r.BizType, true)
	str("channel", &r.Channel, true)
	str("merchantId", &r.MerchantID, true)
	str("currency", &r.Currency, true)
	str("subject", &r.Subject, false)
	if v, ok := raw["amount"]; !ok || string(v) == "null" {
		bad = append(bad, apperr.FieldError{Field: "amount", Reason: "is required"})
	} else if n, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64); err != nil {
		bad = append(bad, apperr.FieldError{Field: "amount", Reason: "must be an integer number of minor units"})
	} else {
		r.Amount = n
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
	add("bizType", ratelimit.CodeProblem(r.BizType))
	add("channel", ratelimit.CodeProblem(r.Channel))
	switch n := utf8.RuneCountInString(r.MerchantID); {
	case !utf8.ValidString(r.MerchantID):
		add("merchantId", "must be valid UTF-8")
	case n < 1 || n > MaxMerchantIDLen:
		add("merchantId", fmt.Sprintf("must be 1..%d characters", MaxMerchantIDLen))
	case hasControl(r.MerchantID):
		add("merchantId", "must not contain control characters")
	}
	if r.Amount < 1 || r.Amount > MaxAmount {
		add("amount", fmt.Sprintf("must be 1..%d minor units", int64(MaxAmount)))
	}
	if !isCurrency(r.Currency) {
		add("currency", "must be an ISO 4217 code of 3 upper-case letters")
	}
	switch {
	case !utf8.ValidString(r.Subject):
		add("subject", "must be valid UTF-8")
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

func isCurrency(s string) bool {
	if len(s) != 3 {
		return false
	}
	for i := 0; i < 3; i++ {
		if s[i] < 'A' || s[i] > 'Z' {
			return false
		}
	}
	return true
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
// echoing in error answers; otherwise "".
func PeekRequestID(data []byte) string {
	var v struct {
		RequestID any `json:"requestId"`
	}
	if json.Unmarshal(data, &v) != nil {
		return ""
	}
	if s, ok := v.RequestID.(string); ok && ValidRequestID(s) {
		return s
	}
	return ""
}
