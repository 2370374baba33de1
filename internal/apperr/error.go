// Package apperr holds payserver's one error vocabulary: an Error type with a
// Code, used by every package, and turned into an HTTP answer in one place
// (internal/httpapi).
package apperr

import (
	"errors"
	"fmt"
	"time"
)

// Code is a stable, machine-readable error code. Clients match on it; never
// rename one.
type Code string

// The codes payserver answers with. Each maps to exactly one HTTP status in
// internal/httpapi.
const (
	// RequestLimited: the channel's sliding window for the request's
	// bizType+channel is full. The request was not sent to the channel.
	RequestLimited Code = "REQUEST_LIMITED"
	// InvalidRequest: the request is malformed; Details names each bad field.
	InvalidRequest Code = "INVALID_REQUEST"
	// ChannelNotSupported: the channel code is well formed but not configured.
	ChannelNotSupported Code = "CHANNEL_NOT_SUPPORTED"
	// IdempotencyConflict: the requestId was used before with another payload,
	// or the first request with it is still being processed.
	IdempotencyConflict Code = "IDEMPOTENCY_CONFLICT"
	// OrderNotFound: no order has the requestId.
	OrderNotFound Code = "ORDER_NOT_FOUND"
	// SlotNotFound: a limits-service release found no window of the key
	// holding the client's requestId (never acquired by this client,
	// already released, or gone with its window); nothing changed.
	SlotNotFound Code = "SLOT_NOT_FOUND"
	// DependencyUnavailable: the database or another dependency is down.
	DependencyUnavailable Code = "DEPENDENCY_UNAVAILABLE"
	// ChannelError: the channel answered with a system error; the payment was
	// not made.
	ChannelError Code = "CHANNEL_ERROR"
	// Unauthorized: an admin endpoint was called without the right token.
	Unauthorized Code = "UNAUTHORIZED"
	// AuthThrottled: too many failed authentications came from the
	// caller's address; it is refused until RetryAfter, whatever it sends.
	AuthThrottled Code = "AUTH_THROTTLED"
	// Forbidden: the caller is authenticated but may not act on this
	// resource (a client outside its bizTypes).
	Forbidden Code = "FORBIDDEN"
	// NotFound: no such route.
	NotFound Code = "NOT_FOUND"
	// MethodNotAllowed: the route exists for another method.
	MethodNotAllowed Code = "METHOD_NOT_ALLOWED"
	// UnsupportedMediaType: a state-changing request (POST, PUT, PATCH,
	// DELETE) did not say Content-Type: application/json.
	UnsupportedMediaType Code = "UNSUPPORTED_MEDIA_TYPE"
	// BodyTooLarge: the request body is over the server's limit, whether
	// its Content-Length says so or a chunked body runs past it.
	BodyTooLarge Code = "BODY_TOO_LARGE"
	// URITooLong: the request target (path and query) is over the server's
	// limit.
	URITooLong Code = "URI_TOO_LONG"
	// HeadersTooLarge: the request's header section is over the server's
	// limit.
	HeadersTooLarge Code = "HEADERS_TOO_LARGE"
	// NotImplemented: the request uses an HTTP feature the server does not
	// implement (a transfer coding other than chunked).
	NotImplemented Code = "NOT_IMPLEMENTED"
	// HTTPVersionNotSupported: the request line names an HTTP version the
	// server does not speak on that connection.
	HTTPVersionNotSupported Code = "HTTP_VERSION_NOT_SUPPORTED"
	// Internal: a bug or an unexpected failure. Only these are logged as errors.
	Internal Code = "INTERNAL"
)

// Error is payserver's error type. The zero value is not useful; build one
// with New or Wrap.
type Error struct {
	// Code classifies the error.
	Code Code
	// Message is safe to show to the API client.
	Message string
	// Details carries structured, client-safe facts (bad fields, limits).
	Details map[string]any
	// RetryAfter, when positive, tells the client how long to wait.
	RetryAfter time.Duration
	// Err is the underlying cause. It is logged for Internal errors and
	// never shown to the client.
	Err error
}

// New returns an Error with a code and a client-safe message.
func New(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Wrap returns an Error with a code and message whose cause is err.
func Wrap(err error, code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Err: err}
}

// WithDetails sets Details and returns e, for chaining at construction.
func (e *Error) WithDetails(d map[string]any) *Error {
	e.Details = d
	return e
}

// Error implements error.
func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// CodeOf returns the code of the first *Error in err's chain, or Internal
// when there is none. CodeOf(nil) is "".
func CodeOf(err error) Code {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return Internal
}

// FieldError names one bad request field and why it is bad.
type FieldError struct {
	Field  string `json:"field"`
	Reason string `json:"reason"`
}

// MaxListedFields is the most field errors an InvalidRequest error lists;
// the number of the others is in Details["unlistedFields"]. It keeps the
// answer to a body with thousands of bad fields small.
const MaxListedFields = 20

// Invalid returns an InvalidRequest error listing the bad fields: the first
// MaxListedFields of them in Details["fields"], and, when there are more,
// how many were left out in Details["unlistedFields"]. The message counts
// them all.
func Invalid(fields ...FieldError) *Error {
	msg := "request is invalid"
	if len(fields) == 1 {
		msg = fields[0].Field + ": " + fields[0].Reason
	} else if len(fields) > 1 {
		msg = fmt.Sprintf("request has %d invalid fields", len(fields))
	}
	details := map[string]any{"fields": fields}
	if n := len(fields); n > MaxListedFields {
		details["fields"] = fields[:MaxListedFields:MaxListedFields]
		details["unlistedFields"] = n - MaxListedFields
		msg = fmt.Sprintf("request has %d invalid fields; the first %d are listed", n, MaxListedFields)
	}
	return &Error{Code: InvalidRequest, Message: msg, Details: details}
}
