// Package console is the operators' console: the dashboard and its
// what-if page, HTML drawn on the server, and the admin reports (channel
// limits and amounts, live usage, routes, admissions, discrepancies,
// limit callers). It is one http.Handler that internal/httpapi serves
// behind admin auth (httpapi.Options.Console), its routes listed by
// Routes; cmd/payserver wires the two.
package console

import (
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"payserver/internal/httpapi"
)

// Console serves the console's routes.
type Console struct {
	engine *gin.Engine
	routes []httpapi.Route
}

// New returns the console.
func New(opts Options) (*Console, error) {
	r, err := newReports(opts)
	if err != nil {
		return nil, err
	}
	dash, err := newDashboard(r)
	if err != nil {
		return nil, err
	}
	c := &Console{engine: gin.New()}
	c.engine.UseRawPath = true
	c.engine.ContextWithFallback = true
	// The server in front has decided who the client is; no header sent
	// by the client changes that here.
	if err := c.engine.SetTrustedProxies(nil); err != nil {
		return nil, err
	}
	c.handle(httpapi.Route{Method: http.MethodGet, Path: "/dashboard", OwnQuery: true, Page: true}, dash.get)
	if opts.WhatIf != nil {
		wopts := *opts.WhatIf
		if wopts.Now == nil {
			wopts.Now = time.Now
		}
		page, err := newWhatIfPage(wopts)
		if err != nil {
			return nil, err
		}
		c.handle(httpapi.Route{Method: http.MethodGet, Path: whatIfPagePath, Page: true, Form: true}, page.get)
		c.handle(httpapi.Route{Method: http.MethodPost, Path: whatIfPagePath, Page: true, Form: true}, page.post)
	}
	c.handle(httpapi.Route{Method: http.MethodGet, Path: "/reports/channel-limits",
		Query: []string{"from", "to", "bizType", "channel", "granularity", "format", "groupBy"}}, r.getReport)
	c.handle(httpapi.Route{Method: http.MethodGet, Path: "/reports/channel-amounts",
		Query: []string{"from", "to", "bizType", "channel", "granularity", "format"}}, r.getAmounts)
	c.handle(httpapi.Route{Method: http.MethodGet, Path: "/channels/usage", Query: []string{"limit", "after"}}, r.getUsage)
	if opts.Discrepancies != nil {
		c.handle(httpapi.Route{Method: http.MethodGet, Path: "/reports/discrepancies", Query: []string{"limit"}}, r.getDiscrepancies)
	}
	if opts.Routes != nil {
		c.handle(httpapi.Route{Method: http.MethodGet, Path: "/reports/routes", Query: []string{"from", "to", "bizType"}}, opts.Routes.get)
	}
	if opts.Admissions != nil {
		c.handle(httpapi.Route{Method: http.MethodGet, Path: "/reports/admissions", Query: []string{"from", "to", "channel", "limit"}}, r.getAdmissions)
	}
	if opts.Callers != nil {
		c.handle(httpapi.Route{Method: http.MethodGet, Path: "/reports/limit-callers"}, r.getCallers)
	}
	return c, nil
}

// handle serves route with h.
func (c *Console) handle(route httpapi.Route, h gin.HandlerFunc) {
	c.engine.Handle(route.Method, route.Path, h)
	c.routes = append(c.routes, route)
}

// Routes lists the console's routes, for the server to check and hand on.
func (c *Console) Routes() []httpapi.Route { return c.routes }

// ServeHTTP answers a request of one of Routes; the server has checked it.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) { c.engine.ServeHTTP(w, r) }
