package httpapi

import (
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"payserver/internal/apperr"
)

// statusOf is the one map from error codes to HTTP statuses.
var statusOf = map[apperr.Code]int{
	apperr.RequestLimited:          http.StatusTooManyRequests,
	apperr.InvalidRequest:          http.StatusBadRequest,
	apperr.ChannelNotSupported:     http.StatusBadRequest,
	apperr.IdempotencyConflict:     http.StatusConflict,
	apperr.OrderNotFound:           http.StatusNotFound,
	apperr.SlotNotFound:            http.StatusNotFound,
	apperr.DependencyUnavailable:   http.StatusServiceUnavailable,
	apperr.ChannelError:            http.StatusBadGateway,
	apperr.Unauthorized:            http.StatusUnauthorized,
	apperr.Forbidden:               http.StatusForbidden,
	apperr.AuthThrottled:           http.StatusTooManyRequests,
	apperr.NotFound:                http.StatusNotFound,
	apperr.MethodNotAllowed:        http.StatusMethodNotAllowed,
	apperr.UnsupportedMediaType:    http.StatusUnsupportedMediaType,
	apperr.BodyTooLarge:            http.StatusRequestEntityTooLarge,
	apperr.URITooLong:              http.StatusRequestURITooLong,
	apperr.HeadersTooLarge:         http.StatusRequestHeaderFieldsTooLarge,
	apperr.NotImplemented:          http.StatusNotImplemented,
	apperr.HTTPVersionNotSupported: http.StatusHTTPVersionNotSupported,
	apperr.Internal:                http.StatusInternalServerError,
}

// StatusOf is the HTTP status of an error code: statusOf's, or 500 for a
// code it does not name.
func StatusOf(code apperr.Code) int {
	if status, ok := statusOf[code]; ok {
		return status
	}
	return http.StatusInternalServerError
}

// ErrorOf is the error r is answered with for err: err itself when it is
// an *apperr.Error, else INTERNAL with a generic message; and BODY_TOO_LARGE
// for a refusal of a body cut at MaxBodyBytes (cappedBody), whatever the
// handler made of the cut. A handler that answers errors itself (an HTML
// page) answers this one.
func ErrorOf(r *http.Request, err error) *apperr.Error {
	var e *apperr.Error
	if !errors.As(err, &e) {
		e = apperr.Wrap(err, apperr.Internal, "internal error")
	}
	if e.Code == apperr.InvalidRequest && bodyCut(r) {
		e = bodyTooLarge()
	}
	return e
}

// WriteError answers with err's status, headers and body. Errors that are not
// an *apperr.Error become INTERNAL with a generic message; only those, and
// DEPENDENCY_UNAVAILABLE ones, are logged.
func WriteError(c *gin.Context, log *slog.Logger, err error, requestID string) {
	e := ErrorOf(c.Request, err)
	status := StatusOf(e.Code)
	switch {
	case status >= 500 && e.Code != apperr.DependencyUnavailable && e.Code != apperr.ChannelError:
		log.Error("internal error", "method", c.Request.Method, "route", c.FullPath(), "requestId", requestID, "err", err)
	case e.Code == apperr.DependencyUnavailable:
		log.Warn("dependency unavailable", "route", c.FullPath(), "requestId", requestID, "err", err)
	}
	if e.RetryAfter > 0 {
		c.Header("Retry-After", strconv.FormatInt(retryAfterSeconds(e.RetryAfter), 10))
	}
	details := e.Details
	if details == nil {
		details = map[string]any{}
	}
	body := errorBody{Code: e.Code, Message: e.Message, RequestID: requestID, Details: details}
	b, encErr := body.appendJSON(make([]byte, 0, 512))
	if encErr != nil {
		// A detail that does not encode (json.Marshal refused it, so gin's
		// encoder would too and send an empty body): an INTERNAL body,
		// strings only, which always encodes.
		log.Error("error body does not encode", "route", c.FullPath(), "requestId", requestID, "code", e.Code, "err", encErr)
		status = http.StatusInternalServerError
		c.Writer.Header().Del("Retry-After")
		body = errorBody{Code: apperr.Internal, Message: "internal error", RequestID: requestID, Details: map[string]any{}}
		b, _ = body.appendJSON(make([]byte, 0, 128))
	}
	c.Abort()
	c.Data(status, "application/json; charset=utf-8", b)
}

// retryAfterSeconds rounds up to whole seconds, at least 1.
func retryAfterSeconds(d time.Duration) int64 {
	return max(apperr.Ceil(d, time.Second), 1)
}

// DatabaseDown maps a storage error to DEPENDENCY_UNAVAILABLE; an
// *apperr.Error passes through.
func DatabaseDown(err error, msg string) error {
	var e *apperr.Error
	if errors.As(err, &e) {
		return err
	}
	return apperr.Wrap(err, apperr.DependencyUnavailable, "%s", msg).WithDetails(map[string]any{"dependency": "database"})
}
