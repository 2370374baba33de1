package httpapi

import (
	"net/url"
	"sort"
	"strconv"

	"payserver/internal/apperr"
	"payserver/internal/ratelimit"
)

// Paging of GET /limits and GET /channels/usage.
const (
	// DefaultLimitsPage is the page size when after is given without
	// limit.
	DefaultLimitsPage = 100
	// MaxLimitsPage is the largest limit accepted.
	MaxLimitsPage = 1000
)

// LimitsPage is the part of the keys GET /limits was asked for. The zero
// value is every key.
type LimitsPage struct {
	// paged is false when neither limit nor after was given: every key.
	paged bool
	// after is the exclusive cursor: the page starts with the first key
	// whose text sorts after it; "" starts with the first key.
	after string
	// limit is the most keys of the page.
	limit int
}

// ParseLimitsPage validates limit (1..MaxLimitsPage) and after (a key as
// GET /limits lists it); unknown or repeated parameters are refused too.
// Empty values are the same as absent, and with neither the answer lists
// every key.
func ParseLimitsPage(v url.Values) (LimitsPage, error) {
	bad := CheckParams(v, []string{"limit", "after"}, "limit, after")
	p := LimitsPage{limit: DefaultLimitsPage}
	if s := first(v["limit"]); s != "" {
		p.paged = true
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxLimitsPage || strconv.Itoa(n) != s {
			// Digits only, no sign or leading zero: the spec's pattern.
			bad = append(bad, apperr.FieldError{Field: "limit", Reason: "must be a whole number from 1 to " + strconv.Itoa(MaxLimitsPage)})
		} else {
			p.limit = n
		}
	}
	if s := first(v["after"]); s != "" {
		p.paged = true
		if _, err := ratelimit.ParseKey(s); err != nil {
			bad = append(bad, apperr.FieldError{Field: "after", Reason: "must be a key as the answer lists it, BIZTYPE:CHANNEL or *:CHANNEL (next of the previous page)"})
		} else {
			p.after = s
		}
	}
	if len(bad) > 0 {
		return LimitsPage{}, apperr.Invalid(bad...)
	}
	return p, nil
}

// of returns the keys of the page among keys (sorted by sortKeys) and the
// key to pass as after for the next page, nil on the last page.
func (p LimitsPage) Of(keys []ratelimit.Key) ([]ratelimit.Key, *string) {
	if !p.paged {
		return keys, nil
	}
	start := sort.Search(len(keys), func(i int) bool { return keys[i].String() > p.after })
	end := min(start+p.limit, len(keys))
	if end == len(keys) {
		return keys[start:end], nil
	}
	next := keys[end-1].String()
	return keys[start:end], &next
}
