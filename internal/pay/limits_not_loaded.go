package pay

import "payserver/internal/apperr"

// LimitsNotLoaded is the answer to every payment before the first limits
// document is in force (fail-safe start): DEPENDENCY_UNAVAILABLE with
// details.dependency "limits" and details.source naming the limits source
// ("nacos", "file"). payserver gives it to the limiter
// (ratelimit.Options.NotLoaded), which answers it to every check and peek
// until then, and to the route table.
func LimitsNotLoaded(source string) error {
	return apperr.New(apperr.DependencyUnavailable,
		"no limits document has been loaded yet from the %s source; payments are refused until a valid one is", source).
		WithDetails(map[string]any{"dependency": "limits", "source": source})
}
