// Package gateway is payserver's side of the channel gateway protocol
// (api/channel-gateway.yaml): the messages a channel gateway takes and
// answers, and their signatures. Every request, answer and notification
// is signed with HMAC-SHA256 over its timestamp, nonce, method, path and
// body (sign.go), under one of the channel's own keys.
package gateway

// Paths of the protocol, relative to a gateway's base URL.
const (
	PathPay   = "/pay"
	PathQuery = "/query"
	PathClose = "/close"
)

// Outcome is a gateway's answer about one order.
type Outcome string

// The outcomes.
const (
	// Succeeded: the payment was made; TradeNo is the channel's number.
	Succeeded Outcome = "SUCCEEDED"
	// Declined: the channel refused the payment (Code, Reason); nothing
	// was charged.
	Declined Outcome = "DECLINED"
	// Throttled: the channel refused to process it (too busy); nothing was
	// charged and the order may be sent again or elsewhere. Not remembered.
	Throttled Outcome = "THROTTLED"
	// Processing: not decided yet; ask again (query).
	Processing Outcome = "PROCESSING"
	// NotFound (query only): the gateway has no such order. Not proof that
	// it was never sent: the request may still be on its way (close it).
	NotFound Outcome = "NOT_FOUND"
	// Closed (close only): the order is closed; Processed says whether the
	// gateway had processed it before.
	Closed Outcome = "CLOSED"
)

// PayRequest is the body of POST /pay.
type PayRequest struct {
	OrderNo    string `json:"orderNo"`
	RequestID  string `json:"requestId"`
	MerchantID string `json:"merchantId"`
	Amount     int64  `json:"amount"`
	Currency   string `json:"currency"`
	Subject    string `json:"subject,omitempty"`
}

// OrderRequest is the body of POST /query and POST /close. RequestID,
// Amount and Currency are the order's, for the gateway's books; the order
// is named by OrderNo alone.
type OrderRequest struct {
	OrderNo   string `json:"orderNo"`
	RequestID string `json:"requestId,omitempty"`
	Amount    int64  `json:"amount,omitempty"`
	Currency  string `json:"currency,omitempty"`
}

// PathNotify is payserver's endpoint for a gateway's asynchronous
// notifications, with the channel's code in place of {code}: a signed
// Answer (SUCCEEDED or DECLINED) about one order.
const PathNotify = "/channels/{code}/notify"

// Answer is every answer's body.
type Answer struct {
	OrderNo string  `json:"orderNo"`
	Outcome Outcome `json:"outcome"`
	// TradeNo is the channel's trade number of a SUCCEEDED payment.
	TradeNo string `json:"tradeNo,omitempty"`
	// Code and Reason say why a payment was DECLINED.
	Code   string `json:"code,omitempty"`
	Reason string `json:"reason,omitempty"`
	// RetryAfterMs, with THROTTLED, is the channel's own wait, if it gave
	// one.
	RetryAfterMs int64 `json:"retryAfterMs,omitempty"`
	// Processed, with CLOSED, says whether the gateway had processed the
	// order before the close: false proves it never will.
	Processed bool `json:"processed,omitempty"`
	// Result, with CLOSED and Processed, is the payment's outcome
	// (SUCCEEDED or DECLINED).
	Result Outcome `json:"result,omitempty"`
}
