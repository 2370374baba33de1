package emulator

import (
	"encoding/json"
	"net/http"
)

// Error codes of the emulator's JSON error bodies.
const (
	codeInvalidRequest   = "INVALID_REQUEST"    // 400: a body or parameter that cannot be read
	codeInvalidBehaviour = "INVALID_BEHAVIOUR"  // 400: an admin field that is unknown or out of range
	codeBadSignature     = "BAD_SIGNATURE"      // 401: missing, wrong or stale signature
	codeForbidden        = "FORBIDDEN"          // 403: admin or ledger from a non-loopback client
	codeNotFound         = "NOT_FOUND"          // 404: no such channel or path
	codeMethod           = "METHOD_NOT_ALLOWED" // 405
	codeInternal         = "INTERNAL"           // 500: the ledger could not be written or read
	codeSystemError      = "SYSTEM_ERROR"       // 503: an injected channel error (errorRate)
	codeShuttingDown     = "SHUTTING_DOWN"      // 503: the emulator stopped while the call waited
)

// Decline codes of the emulated channel.
const (
	declineInsufficientFunds = "INSUFFICIENT_FUNDS" // declineRate
	declineOrderClosed       = "ORDER_CLOSED"       // a pay after a close of an unprocessed order
)

// errorBody is every error's JSON body.
type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// Field names the admin field at fault.
	Field string `json:"field,omitempty"`
}

func newError(code, message string) errorBody {
	return errorBody{Error: errorDetail{Code: code, Message: message}}
}

// writeJSON writes v as an unsigned JSON answer (admin, ledger, routing
// errors).
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status, body = http.StatusInternalServerError, []byte(`{"error":{"code":"INTERNAL","message":"encoding the answer"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}

func writeError(w http.ResponseWriter, status int, code, message string) {
	writeJSON(w, status, newError(code, message))
}
