package httpapi

import (
	"context"
	"net/http"

	"github.com/gin-gonic/gin"
)

// Console is the operators' console (internal/console): its pages and
// reports, served by the handler behind admin auth. The handler answers
// the console's routes only; the server checks their requests first, as it
// checks its own.
type Console interface {
	http.Handler
	// Routes lists the routes the handler serves.
	Routes() []Route
}

// Route is one route of the console, and what the server checks of its
// requests before it hands them on.
type Route struct {
	Method, Path string
	// Query lists the query parameters the route takes; any other is
	// refused (400). With OwnQuery the route checks its parameters itself:
	// the dashboard shows a bad one on the page it answers.
	Query    []string
	OwnQuery bool
	// Form is true for a route that takes an HTML form body rather than
	// JSON; it refuses other sites' requests itself (CrossSiteProblem).
	Form bool
	// Page is true for a page of the dashboard: a browser without a session
	// is shown the login form for it, and a login returns to it.
	Page bool
}

// consoleRoutes is what the handler knows of the console's routes.
type consoleRoutes struct {
	query    map[string][]string // by path, with the API's (queryParams)
	ownQuery map[string]bool
	forms    map[string]bool
	pages    map[string]bool
}

func newConsoleRoutes(c Console) consoleRoutes {
	cr := consoleRoutes{query: map[string][]string{}, ownQuery: map[string]bool{}, forms: map[string]bool{}, pages: map[string]bool{}}
	for path, names := range queryParams {
		cr.query[path] = names
	}
	if c == nil {
		return cr
	}
	for _, r := range c.Routes() {
		if len(r.Query) > 0 {
			cr.query[r.Path] = r.Query
		}
		cr.ownQuery[r.Path] = cr.ownQuery[r.Path] || r.OwnQuery
		cr.forms[r.Path] = cr.forms[r.Path] || r.Form
		cr.pages[r.Path] = cr.pages[r.Path] || r.Page
	}
	return cr
}

// registerConsole adds the console's routes to the admin group, each
// handed on to the console.
func (h *handler) registerConsole(admin *gin.RouterGroup) {
	for _, r := range h.opts.Console.Routes() {
		admin.Handle(r.Method, r.Path, h.toConsole)
	}
}

// toConsole hands a request on to the console, with its session (if it
// came with one) for SessionCSRF.
func (h *handler) toConsole(c *gin.Context) {
	r := c.Request
	if sess := sessionOf(c); sess != nil {
		r = r.WithContext(context.WithValue(r.Context(), sessionCtxKey{}, sess))
	}
	h.opts.Console.ServeHTTP(c.Writer, r)
}

// sessionCtxKey is the context key of the session of a request handed on
// to the console.
type sessionCtxKey struct{}

// SessionCSRF returns the CSRF token of the session a console request came
// with, for the forms of its pages; "" when it was let in otherwise
// (bearer token, loopback).
func SessionCSRF(r *http.Request) string {
	if sess, _ := r.Context().Value(sessionCtxKey{}).(*adminSession); sess != nil {
		return sess.csrf
	}
	return ""
}
