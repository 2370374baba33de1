package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// ErrUnauthorized is returned when payserver refuses the token (401).
var ErrUnauthorized = errors.New("payserver: the client token was refused")

// ErrSlotNotFound is returned by Release when no window of the key holds
// the requestId for this client (404 SLOT_NOT_FOUND): it was never
// acquired by this client, was released before, or left its window.
// Nothing changed.
var ErrSlotNotFound = errors.New("payserver: no slot is held for this requestId")

// Body is payserver's JSON error body.
type Body struct {
	Code      string         `json:"code"`
	Message   string         `json:"message"`
	RequestID string         `json:"requestId"`
	Details   map[string]any `json:"details"`
}

// LimitedError is a refusal (429 REQUEST_LIMITED): the window is full.
type LimitedError struct {
	// RetryAfter is how long until the window should have room
	// (details.retryAfterMs, else the Retry-After header). Zero when no
	// retry can succeed at a known time: ExceedsCap, or Closed without
	// ClosedUntil. Retry only when it is positive.
	RetryAfter time.Duration
	// Closed is true for a key that refuses everything (a limit of 0, such
	// as a maintenance schedule).
	Closed bool
	// ClosedUntil, for a Closed key, is when a schedule opens it again
	// (details.closedUntil); zero when no such time is known: retrying does
	// not help until ops reopen it.
	ClosedUntil time.Time
	// ExceedsCap is true when the request's amount can never fit a window
	// (it is above the cap): waiting does not help; only a smaller amount
	// can.
	ExceedsCap bool
	// Rule names the binding window ("count/1s", "amount/day"); Limit is its
	// limit (the cap, in minor units, for an amount rule), Used what it
	// holds, and Window its size (zero for a calendar window).
	Rule   string
	Limit  int64
	Used   int64
	Window time.Duration
	Body   Body
}

func (e *LimitedError) Error() string {
	switch {
	case e.Closed && !e.ClosedUntil.IsZero():
		return "payserver: limited: the channel is closed for this bizType until " + e.ClosedUntil.Format(time.RFC3339)
	case e.Closed:
		return "payserver: limited: the channel is closed for this bizType"
	case e.ExceedsCap:
		return fmt.Sprintf("payserver: limited: the amount is above the %s cap %d; no wait helps", e.Rule, e.Limit)
	}
	return fmt.Sprintf("payserver: limited by %s (%d of %d used); retry after %v", e.Rule, e.Used, e.Limit, e.RetryAfter)
}

// FieldError names one bad field.
type FieldError struct {
	Field  string `json:"field"`
	Reason string `json:"reason"`
}

// InvalidError is a refused request (400): Fields names each bad field.
type InvalidError struct {
	Message string
	Fields  []FieldError
	Body    Body
}

func (e *InvalidError) Error() string { return "payserver: invalid request: " + e.Message }

// ConflictError is a 409: the requestId is held otherwise than this call
// asks (Body.Code says how: IDEMPOTENCY_CONFLICT for a requestId of
// another request, such as a release of a POST /pay requestId, or one
// held for another amount). Retrying the same call meets the same answer;
// a new request needs a new requestId.
type ConflictError struct {
	Body Body
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("payserver: 409 %s: %s", e.Body.Code, e.Body.Message)
}

// UnavailableError is anything else: payserver or its dependencies could
// not answer (5xx, a transport error, a timeout), answered another status
// (Body.Code says which), or answered an error whose body is not
// payserver's JSON error body (Err says so: a proxy's page, a cut body).
// It is worth retrying with the same requestId when Status is 0 or 5xx.
type UnavailableError struct {
	Status int // 0 for transport errors and timeouts
	Body   Body
	Err    error
}

func (e *UnavailableError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("payserver: unavailable (status %d): %v", e.Status, e.Err)
	}
	return fmt.Sprintf("payserver: %d %s: %s", e.Status, e.Body.Code, e.Body.Message)
}

func (e *UnavailableError) Unwrap() error { return e.Err }

func decodeError(resp *http.Response, data []byte) error {
	var b Body
	if err := json.Unmarshal(data, &b); err != nil || b.Code == "" {
		if resp.StatusCode == http.StatusUnauthorized {
			return ErrUnauthorized
		}
		if err == nil {
			err = errors.New("no error code")
		}
		// Not payserver's answer (a proxy's, or cut short): nothing in it
		// can be trusted to say more than its status.
		return &UnavailableError{Status: resp.StatusCode, Err: fmt.Errorf("an error answer that is not payserver's JSON error body: %w", err)}
	}
	switch resp.StatusCode {
	case http.StatusUnauthorized:
		return ErrUnauthorized
	case http.StatusConflict:
		return &ConflictError{Body: b}
	case http.StatusNotFound:
		if b.Code == "SLOT_NOT_FOUND" {
			return ErrSlotNotFound
		}
	case http.StatusTooManyRequests:
		e := &LimitedError{Body: b}
		if ms, ok := number(b.Details["retryAfterMs"]); ok {
			e.RetryAfter = time.Duration(ms) * time.Millisecond
		} else if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil {
			e.RetryAfter = time.Duration(s) * time.Second
		}
		if n, ok := number(b.Details["limit"]); ok {
			e.Limit = n
		} else if n, ok := number(b.Details["amount"]); ok {
			e.Limit = n
		}
		e.Used, _ = number(b.Details["used"])
		e.Rule, _ = b.Details["rule"].(string)
		e.Closed, _ = b.Details["closed"].(bool)
		e.ExceedsCap, _ = b.Details["exceedsCap"].(bool)
		if s, ok := b.Details["closedUntil"].(string); ok {
			e.ClosedUntil, _ = time.Parse(time.RFC3339, s)
		}
		if ms, ok := number(b.Details["windowMs"]); ok {
			e.Window = time.Duration(ms) * time.Millisecond
		}
		return e
	case http.StatusBadRequest:
		e := &InvalidError{Message: b.Message, Body: b}
		if fs, ok := b.Details["fields"].([]any); ok {
			for _, f := range fs {
				m, _ := f.(map[string]any)
				field, _ := m["field"].(string)
				reason, _ := m["reason"].(string)
				e.Fields = append(e.Fields, FieldError{Field: field, Reason: reason})
			}
		}
		return e
	}
	return &UnavailableError{Status: resp.StatusCode, Body: b}
}

func number(v any) (int64, bool) {
	f, ok := v.(float64)
	return int64(f), ok
}
