// Package api holds payserver's OpenAPI contract (openapi.yaml) and a
// Validator that checks real HTTP exchanges against it, so tests can prove
// the server answers exactly as documented.
package api

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

//go:embed openapi.yaml
var specYAML []byte

// Spec returns the raw OpenAPI document (YAML). The caller may modify the
// returned slice; it is a copy.
func Spec() []byte { return bytes.Clone(specYAML) }

// Validator checks real HTTP exchanges against openapi.yaml.
type Validator struct {
	doc    *openapi3.T
	router routers.Router
	// notFound and methodNotAllowed are synthetic operations for requests
	// no documented route matches: the server must answer them 404
	// NOT_FOUND or 405 METHOD_NOT_ALLOWED, with the documented error body.
	notFound, methodNotAllowed *openapi3.Operation
}

// NewValidator loads openapi.yaml, validates the document itself and builds
// a router over it. Routes match on method and path only: whatever host the
// request URL names (tests use 127.0.0.1 on a random port) is ignored.
func NewValidator() (*Validator, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(specYAML)
	if err != nil {
		return nil, fmt.Errorf("api: load openapi.yaml: %w", err)
	}
	ctx := context.Background()
	if err := doc.Validate(ctx); err != nil {
		return nil, fmt.Errorf("api: openapi.yaml is not a valid OpenAPI document: %w", err)
	}
	// Match any host: a server URL of "/" has no host or base path.
	doc.Servers = openapi3.Servers{{URL: "/"}}
	for _, item := range doc.Paths.Map() {
		item.Servers = nil
	}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("api: route openapi.yaml: %w", err)
	}
	v := &Validator{doc: doc, router: router}
	if v.notFound, err = syntheticOp(doc, http.StatusNotFound, "NotFound"); err != nil {
		return nil, err
	}
	if v.methodNotAllowed, err = syntheticOp(doc, http.StatusMethodNotAllowed, "MethodNotAllowed"); err != nil {
		return nil, err
	}
	return v, nil
}

// syntheticOp returns an operation whose only response is the named
// components.responses entry under status.
func syntheticOp(doc *openapi3.T, status int, name string) (*openapi3.Operation, error) {
	resp := doc.Components.Responses[name]
	if resp == nil || resp.Value == nil {
		return nil, fmt.Errorf("api: openapi.yaml has no components.responses.%s", name)
	}
	return &openapi3.Operation{Responses: openapi3.NewResponses(openapi3.WithStatus(status, resp))}, nil
}

// Doc returns the parsed document. Callers must not modify it.
func (v *Validator) Doc() *openapi3.T { return v.doc }

// CheckResponse checks one answer to req against the document: the route is
// looked up by req's method and path (host ignored), then the status must be
// documented for the route and the Content-Type, body schema and required
// headers must match. req's body is never read and request validation is
// off, so deliberately bad requests may be checked.
//
// A request that matches no documented path must have been answered 404
// NOT_FOUND, and one whose path is documented for other methods only 405
// METHOD_NOT_ALLOWED, each with the documented error body. HEAD requests
// and 301, 304, 307 and 308 answers are not checked.
func (v *Validator) CheckResponse(req *http.Request, status int, header http.Header, body []byte) error {
	if req == nil || req.URL == nil {
		return errors.New("api: CheckResponse needs the request")
	}
	// Route lookup sees only method and path; the body is not needed and may
	// have been consumed already.
	u := &url.URL{Path: req.URL.Path, RawPath: req.URL.RawPath, RawQuery: req.URL.RawQuery}
	lookup := &http.Request{Method: req.Method, URL: u, Header: req.Header, Body: http.NoBody}
	if lookup.Header == nil {
		lookup.Header = http.Header{}
	}

	route, params, err := v.router.FindRoute(lookup)
	var where string
	switch {
	case err == nil:
		where = "route " + route.Method + " " + route.Path
	case errors.Is(err, routers.ErrPathNotFound):
		route = &routers.Route{Spec: v.doc, Path: u.Path, Method: req.Method, Operation: v.notFound}
		where = "path not documented, so only 404 NOT_FOUND is allowed"
	case errors.Is(err, routers.ErrMethodNotAllowed):
		route = &routers.Route{Spec: v.doc, Path: u.Path, Method: req.Method, Operation: v.methodNotAllowed}
		where = "method not documented for this path, so only 405 METHOD_NOT_ALLOWED is allowed"
	default:
		return fmt.Errorf("api: %s %s: route lookup: %w", req.Method, u.Path, err)
	}

	if header == nil {
		header = http.Header{}
	}
	input := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{
			Request:    lookup,
			PathParams: params,
			Route:      route,
			// Requests are never validated here: tests send bad ones on
			// purpose.
			Options: &openapi3filter.Options{ExcludeRequestBody: true, ExcludeRequestQueryParams: true},
		},
		Status: status,
		Header: header,
		Body:   io.NopCloser(bytes.NewReader(body)),
		Options: &openapi3filter.Options{
			IncludeResponseStatus: true,
			MultiError:            true,
		},
	}
	if err := openapi3filter.ValidateResponse(context.Background(), input); err != nil {
		return fmt.Errorf("api: %s %s -> %d does not match openapi.yaml (%s): %w",
			req.Method, u.Path, status, where, err)
	}
	if status == http.StatusTooManyRequests {
		return checkRetryAfter(header, body)
	}
	return nil
}

// checkRetryAfter enforces what OpenAPI 3.0 cannot express: a 429 carries
// Retry-After exactly when a retry can succeed: not for an amount above its
// cap (details.exceedsCap), for a closed key (details.closed) only when a
// schedule opens it again (details.closedUntil), and for a payment its
// channel throttled (details.reason channelThrottled) exactly when the
// answer has details.retryAfterMs (the first answer, not its replays).
func checkRetryAfter(header http.Header, body []byte) error {
	var e struct {
		Details struct {
			Closed       bool   `json:"closed"`
			ClosedUntil  string `json:"closedUntil"`
			ExceedsCap   bool   `json:"exceedsCap"`
			Reason       string `json:"reason"`
			RetryAfterMs *int64 `json:"retryAfterMs"`
		} `json:"details"`
	}
	if err := json.Unmarshal(body, &e); err != nil {
		return fmt.Errorf("api: 429 body: %w", err)
	}
	has := header.Get("Retry-After") != ""
	never := (e.Details.Closed && e.Details.ClosedUntil == "") || e.Details.ExceedsCap ||
		(e.Details.Reason == "channelThrottled" && e.Details.RetryAfterMs == nil)
	switch {
	case never && has:
		return errors.New(`api: 429 for a closed key without details.closedUntil, an amount above its cap (details.exceedsCap) or a throttled payment's replay must not carry header "Retry-After"`)
	case !never && !has:
		return errors.New(`api: 429: response header "Retry-After" missing (required unless details.exceedsCap, details.closed without details.closedUntil, or a throttled payment's replay)`)
	}
	return nil
}
