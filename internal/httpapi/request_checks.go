package httpapi

import (
	"strings"

	"github.com/gin-gonic/gin"

	"payserver/internal/apperr"
)

// queryParams lists, by route, the query parameters each route takes;
// every other route takes none. The handlers check the values. GET
// /dashboard is not here: it shows a bad or unknown parameter on the page
// it answers (dashboard_filter.go), as a browser's user reads it.
var queryParams = map[string][]string{
	loginPath:                  {"next"},
	"/limits":                  {"limit", "after"},
	"/channels/usage":          {"limit", "after"},
	"/limits/history":          {"limit", "before"},
	"/limits/what-if":          {"from", "to"},
	"/reports/channel-limits":  {"from", "to", "bizType", "channel", "granularity", "format", "groupBy"},
	"/reports/channel-amounts": {"from", "to", "bizType", "channel", "granularity", "format"},
	"/reports/routes":          {"from", "to", "bizType"},
	"/reports/admissions":      {"from", "to", "channel", "limit"},
	"/reports/discrepancies":   {"limit"},
	"/v1/limits/peek":          {"bizType", "channel", "amount", "currency", "merchantId"},
}

// checkPublic runs checkRequest for every route but the authenticated ones
// (handler.authenticated), which run it after their authentication, so
// that an unauthenticated call is 401 whatever it sends. A route added
// without authentication is checked by default.
func (h *handler) checkPublic(c *gin.Context) {
	if !h.authenticated[c.Request.Method+" "+c.FullPath()] {
		h.checkRequest(c)
	}
}

// routeSet returns the routes as "METHOD /path".
func routeSet(routes gin.RoutesInfo) map[string]bool {
	out := make(map[string]bool, len(routes))
	for _, r := range routes {
		out[r.Method+" "+r.Path] = true
	}
	return out
}

// checkRequest refuses what a route does not take: a state-changing request
// whose body is not JSON (requireJSON, 415), and a query parameter the
// route does not take (queryParams), or one given twice (400 naming each).
// Unknown routes are left to NoRoute (404).
func (h *handler) checkRequest(c *gin.Context) {
	h.requireJSON(c)
	if c.IsAborted() {
		return
	}
	q := c.Request.URL.Query()
	if len(q) == 0 || c.FullPath() == "" || c.FullPath() == "/dashboard" {
		return
	}
	allowed := queryParams[c.FullPath()]
	want := "none"
	if len(allowed) > 0 {
		want = strings.Join(allowed, ", ")
	}
	if bad := checkParams(q, allowed, want); len(bad) > 0 {
		writeError(c, h.log, apperr.Invalid(bad...), "")
	}
}
