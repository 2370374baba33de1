package httpapi_test

import (
	"log/slog"
	"testing"

	"github.com/gin-gonic/gin"

	"payserver/internal/console"
	"payserver/internal/httpapi"
)

// whatIfMount is POST /limits/what-if and the console's what-if page on
// one service.
type whatIfMount struct {
	route func(*gin.RouterGroup)
	opts  httpapi.WhatIfOptions
}

// mountAll splits what a test serves into httpapi's admin routes and the
// console: admin route registrations, a console, and whatIfMounts. base,
// when not nil, is the console to build (with the what-if page when a
// whatIfMount is given).
func mountAll(t *testing.T, base *console.Options, parts []any) ([]func(*gin.RouterGroup), httpapi.Console) {
	t.Helper()
	var admin []func(*gin.RouterGroup)
	var c httpapi.Console
	var whatIf *httpapi.WhatIfOptions
	for _, p := range parts {
		switch p := p.(type) {
		case func(*gin.RouterGroup):
			admin = append(admin, p)
		case *console.Console:
			c = p
		case whatIfMount:
			admin = append(admin, p.route)
			opts := p.opts
			whatIf = &opts
		default:
			t.Fatalf("cannot serve %T", p)
		}
	}
	if base == nil && whatIf != nil {
		base = &console.Options{Reports: &fakeReports{}, Usage: fakeUsage{}, Limits: fakeLimitsView{}, Logger: slog.New(slog.DiscardHandler)}
	}
	if base != nil {
		opts := *base
		opts.WhatIf = whatIf
		built, err := console.New(opts)
		if err != nil {
			t.Fatal(err)
		}
		c = built
	}
	return admin, c
}
