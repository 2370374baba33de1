package httpapi

import (
	"net/url"
	"sort"

	"payserver/internal/apperr"
)

// CheckParams lists, sorted, each query parameter of v that is not in
// allowed, and each allowed one given more than once. want is the list of
// allowed names as the error says it, such as "limit, before".
func CheckParams(v url.Values, allowed []string, want string) []apperr.FieldError {
	ok := map[string]bool{}
	for _, a := range allowed {
		ok[a] = true
	}
	names := make([]string, 0, len(v))
	for name := range v {
		names = append(names, name)
	}
	sort.Strings(names)
	var bad []apperr.FieldError
	for _, name := range names {
		switch {
		case !ok[name]:
			bad = append(bad, apperr.FieldError{Field: name, Reason: "is not a parameter of this route (want " + want + ")"})
		case len(v[name]) > 1:
			bad = append(bad, apperr.FieldError{Field: name, Reason: "must be given at most once"})
		}
	}
	return bad
}
