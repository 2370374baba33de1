package httpapi

import (
	"strings"

	"github.com/gin-gonic/gin"

	"payserver/internal/apperr"
)

// queryParams lists, by route, the query parameters each route of the API
// takes; every other route takes none (the console's say theirs in
// Route.Query). The handlers check the values.
var queryParams = map[string][]string{
	loginPath:         {"next"},
	"/limits":         {"limit", "after"},
	"/limits/history": {"limit", "before"},
	"/limits/what-if": {"from", "to"},
	"/v1/limits/peek": {"bizType", "channel", "amount", "currency", "merchantId"},
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
	if len(q) == 0 || c.FullPath() == "" || h.console.ownQuery[c.FullPath()] {
		return
	}
	allowed := h.console.query[c.FullPath()]
	want := "none"
	if len(allowed) > 0 {
		want = strings.Join(allowed, ", ")
	}
	if bad := CheckParams(q, allowed, want); len(bad) > 0 {
		WriteError(c, h.log, apperr.Invalid(bad...), "")
	}
}
