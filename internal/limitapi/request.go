package limitapi

import (
	"bytes"
	"encoding/json"
	"sort"
	"time"
	"unicode/utf8"

	"payserver/internal/apperr"
	"payserver/internal/pay"
	"payserver/internal/ratelimit"
)

// AcquireRequest is a validated POST /v1/limits/acquire body.
type AcquireRequest struct {
	Key       ratelimit.Key
	RequestID string
	// Amount (minor units) and Currency are optional; 0 and "" mean none.
	// They are validated and count against the money caps (amount
	// windows) of the limits document.
	Amount   int64
	Currency string
	// MerchantID is the merchant the slot is taken for, optional: windows
	// with limits per merchant count a request without one as the merchant
	// "-" (ratelimit.NoMerchant).
	MerchantID string
	// MaxWait is how long a refused request may wait for a slot; 0 means
	// none.
	MaxWait time.Duration
}

// ReleaseRequest is a validated POST /v1/limits/release body.
type ReleaseRequest struct {
	Key       ratelimit.Key
	RequestID string
	// MerchantID is the merchant the slot was acquired for, optional:
	// windows with limits per merchant release that merchant's use ("-"
	// without one, as acquire counts it).
	MerchantID string
}

// PeekRequest is a validated GET /v1/limits/peek query.
type PeekRequest struct {
	Key      ratelimit.Key
	Amount   int64  // 0 means none
	Currency string // "" means none
	// MerchantID is the merchant the peek answers for, optional: windows
	// with limits per merchant answer for "-" (ratelimit.NoMerchant)
	// without one, as acquire counts it.
	MerchantID string
}

// object is a decoded JSON object body, field by field, with the problems
// found so far.
type object struct {
	raw map[string]json.RawMessage
	bad []apperr.FieldError
}

// decodeObject parses data as one JSON object whose fields are all in
// known; every problem is collected, field by field, like POST /pay.
func decodeObject(data []byte, known ...string) object {
	var o object
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&o.raw); err != nil || o.raw == nil {
		// Worded as POST /pay words it, never with Go's type names.
		o.bad = append(o.bad, apperr.FieldError{Field: "body", Reason: pay.BodyProblem(err)})
		return o
	}
	if dec.More() {
		o.raw = nil
		o.bad = append(o.bad, apperr.FieldError{Field: "body", Reason: "must hold exactly one JSON object"})
		return o
	}
	names := make([]string, 0, len(o.raw))
	for name := range o.raw {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		ok := false
		for _, k := range known {
			ok = ok || k == name
		}
		switch {
		case ok:
		case name == "" || len(name) > 64 || !utf8.ValidString(name):
			o.bad = append(o.bad, apperr.FieldError{Field: "body", Reason: "has an unknown field with an empty, over-long or invalid name"})
		default:
			o.bad = append(o.bad, apperr.FieldError{Field: name, Reason: "unknown field"})
		}
	}
	return o
}

func (o *object) failed() bool { return o.raw == nil }

func (o *object) add(field, reason string) {
	if reason != "" {
		o.bad = append(o.bad, apperr.FieldError{Field: field, Reason: reason})
	}
}

// str reads a string field and checks it with rule.
func (o *object) str(name string, required bool, rule func(string) string) string {
	v, ok := o.raw[name]
	if !ok || string(v) == "null" {
		if required {
			o.add(name, "is required")
		}
		return ""
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		o.add(name, "must be a string")
		return ""
	}
	o.add(name, rule(s))
	return s
}

// amount reads the optional amount field.
func (o *object) amount() int64 {
	v, ok := o.raw["amount"]
	if !ok || string(v) == "null" {
		return 0
	}
	n, reason := pay.ParseAmount(string(bytes.TrimSpace(v)))
	o.add("amount", reason)
	return n
}

func (o *object) err() error {
	if len(o.bad) > 0 {
		return apperr.Invalid(o.bad...)
	}
	return nil
}

func (o *object) key() ratelimit.Key {
	return ratelimit.Key{
		BizType: o.str("bizType", true, ratelimit.BizTypeProblem),
		Channel: o.str("channel", true, ratelimit.CodeProblem),
	}
}

// reasonCurrencyWithAmount: an amount without its currency would pass every
// amount cap written for one currency uncounted.
const reasonCurrencyWithAmount = "is required with amount: an amount counts against the caps of its currency"

// DecodeAcquire parses and validates an acquire body with POST /pay's field
// rules. Every problem is reported in one INVALID_REQUEST error.
func DecodeAcquire(data []byte) (AcquireRequest, error) {
	o := decodeObject(data, "bizType", "channel", "requestId", "amount", "currency", "merchantId", "maxWaitMs")
	if o.failed() {
		return AcquireRequest{}, o.err()
	}
	r := AcquireRequest{Key: o.key(), RequestID: o.str("requestId", true, pay.RequestIDProblem)}
	r.Amount = o.amount()
	r.Currency = o.str("currency", false, pay.CurrencyProblem)
	r.MerchantID = o.str("merchantId", false, ratelimit.MerchantProblem)
	if r.Amount > 0 && pay.AmountProblem(r.Amount) == "" && r.Currency == "" {
		o.add("currency", reasonCurrencyWithAmount)
	}
	d, reason := pay.ParseMaxWaitMs(o.raw["maxWaitMs"])
	o.add("maxWaitMs", reason)
	r.MaxWait = d
	if err := o.err(); err != nil {
		return AcquireRequest{}, err
	}
	return r, nil
}

// DecodeRelease parses and validates a release body.
func DecodeRelease(data []byte) (ReleaseRequest, error) {
	o := decodeObject(data, "bizType", "channel", "requestId", "merchantId")
	if o.failed() {
		return ReleaseRequest{}, o.err()
	}
	r := ReleaseRequest{Key: o.key(), RequestID: o.str("requestId", true, pay.RequestIDProblem),
		MerchantID: o.str("merchantId", false, ratelimit.MerchantProblem)}
	if err := o.err(); err != nil {
		return ReleaseRequest{}, err
	}
	return r, nil
}

// ParsePeek validates a peek query: bizType and channel required, amount,
// currency and merchantId optional. get returns a parameter's values.
func ParsePeek(get func(name string) []string, names []string) (PeekRequest, error) {
	var bad []apperr.FieldError
	for _, n := range names {
		if n != "bizType" && n != "channel" && n != "amount" && n != "currency" && n != "merchantId" {
			bad = append(bad, apperr.FieldError{Field: n, Reason: "unknown parameter"})
		}
	}
	one := func(name string, required bool) (string, bool) {
		vs := get(name)
		switch {
		case len(vs) == 0:
			if required {
				bad = append(bad, apperr.FieldError{Field: name, Reason: "is required"})
			}
			return "", false
		case len(vs) > 1:
			bad = append(bad, apperr.FieldError{Field: name, Reason: "must be given once"})
			return "", false
		}
		return vs[0], true
	}
	var r PeekRequest
	for _, f := range []struct {
		name string
		dst  *string
	}{{"bizType", &r.Key.BizType}, {"channel", &r.Key.Channel}} {
		if v, ok := one(f.name, true); ok {
			problem := ratelimit.CodeProblem
			if f.name == "bizType" {
				problem = ratelimit.BizTypeProblem
			}
			if reason := problem(v); reason != "" {
				bad = append(bad, apperr.FieldError{Field: f.name, Reason: reason})
			}
			*f.dst = v
		}
	}
	if v, ok := one("amount", false); ok {
		if n, reason := pay.ParseAmount(v); reason != "" {
			bad = append(bad, apperr.FieldError{Field: "amount", Reason: reason})
		} else {
			r.Amount = n
		}
	}
	if v, ok := one("currency", false); ok {
		if reason := pay.CurrencyProblem(v); reason != "" {
			bad = append(bad, apperr.FieldError{Field: "currency", Reason: reason})
		}
		r.Currency = v
	}
	if v, ok := one("merchantId", false); ok {
		if reason := ratelimit.MerchantProblem(v); reason != "" {
			bad = append(bad, apperr.FieldError{Field: "merchantId", Reason: reason})
		}
		r.MerchantID = v
	}
	if r.Amount > 0 && r.Currency == "" {
		bad = append(bad, apperr.FieldError{Field: "currency", Reason: reasonCurrencyWithAmount})
	}
	if len(bad) > 0 {
		return PeekRequest{}, apperr.Invalid(bad...)
	}
	return r, nil
}
