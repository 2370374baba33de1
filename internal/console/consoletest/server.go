package consoletest

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"payserver/api"
	"payserver/internal/console"
	"payserver/internal/httpapi"
)

// Server is an httptest server of httpapi's handler; Reports, when set, is
// the report service of its console.
type Server struct {
	Srv     *httptest.Server
	Reports *Reports
	v       *api.Validator
}

// Answer is the status, headers and body of an answer.
type Answer struct {
	Status int
	Header http.Header
	Body   string
}

// Get calls path and checks the answer against api/openapi.yaml.
func (s *Server) Get(t *testing.T, path, token string) Answer {
	t.Helper()
	return s.Do(t, http.MethodGet, path, token, "")
}

// Do sends method to path, with body as JSON when it is not empty, and
// checks the answer against api/openapi.yaml.
func (s *Server) Do(t *testing.T, method, path, token, body string) Answer {
	t.Helper()
	contentType := ""
	if body != "" {
		contentType = "application/json"
	}
	return s.exchange(t, method, path, contentType, token, strings.NewReader(body), true)
}

// exchange sends one request with the headers given (none when empty) and
// reads the answer; check checks it against api/openapi.yaml.
func (s *Server) exchange(t *testing.T, method, path, contentType, token string, body io.Reader, check bool) Answer {
	t.Helper()
	req, err := http.NewRequest(method, s.Srv.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if check {
		if err := s.v.CheckResponse(req, resp.StatusCode, resp.Header, b); err != nil {
			t.Errorf("%s %s breaks api/openapi.yaml: %v\n%s", method, path, err, b)
		}
	}
	return Answer{resp.StatusCode, resp.Header, string(b)}
}

// WhatIfMount is POST /limits/what-if and the console's what-if page on
// one service.
type WhatIfMount struct {
	route func(*gin.RouterGroup)
	opts  httpapi.WhatIfOptions
}

// mountAll splits what a test serves into httpapi's admin routes and the
// console: admin route registrations, a console, and WhatIfMounts. base,
// when not nil, is the console to build (with the what-if page when a
// WhatIfMount is given).
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
		case WhatIfMount:
			admin = append(admin, p.route)
			opts := p.opts
			whatIf = &opts
		default:
			t.Fatalf("cannot serve %T", p)
		}
	}
	if base == nil && whatIf != nil {
		base = &console.Options{Reports: &Reports{}, Usage: Usage{}, Limits: LimitsView{}, Logger: slog.New(slog.DiscardHandler)}
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

// ServeAdmin serves the admin routes (with token, or loopback-only when it
// is empty), checking every answer against api/openapi.yaml.
func ServeAdmin(t *testing.T, token string, routes ...any) *Server {
	t.Helper()
	gin.SetMode(gin.TestMode)
	admin, c := mountAll(t, nil, routes)
	h, err := httpapi.New(httpapi.Options{Pay: NopPay{}, Logger: slog.New(slog.DiscardHandler), AdminToken: token, Admin: admin, Console: c})
	if err != nil {
		t.Fatal(err)
	}
	return ServeHandler(t, h)
}

// ServeHandler serves h, checking every answer against api/openapi.yaml.
func ServeHandler(t *testing.T, h http.Handler) *Server {
	t.Helper()
	v, err := api.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Srv: httptest.NewServer(h), v: v}
	t.Cleanup(s.Srv.Close)
	return s
}

// Send sends one request, its answer unchecked; chunked sends the body
// without a Content-Length.
func (s *Server) Send(t *testing.T, method, path, contentType, token string, body string, chunked bool) Answer {
	t.Helper()
	var r io.Reader = strings.NewReader(body)
	if chunked {
		r = io.NopCloser(r) // hides the length: net/http sends it chunked
	}
	return s.exchange(t, method, path, contentType, token, r, false)
}

// Post sends body to path as JSON and checks the answer against
// api/openapi.yaml.
func (s *Server) Post(t *testing.T, path, token, body string) Answer {
	t.Helper()
	return s.Do(t, http.MethodPost, path, token, body)
}
