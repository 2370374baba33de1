// Package channel defines the payment-channel interface payserver calls after
// the limiter admits a request, and a registry of configured channels.
package channel

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"
)

// Request is one payment as sent to a channel.
type Request struct {
	OrderNo    string
	RequestID  string
	BizType    string
	MerchantID string
	Amount     int64
	Currency   string
	Subject    string
	// CreatedAt is when the order was created (its claim), for a channel
	// that must tell orders from before its own start (Simulator).
	CreatedAt time.Time
}

// Status is a channel's definitive answer.
type Status string

// Definitive outcomes.
const (
	Succeeded Status = "SUCCEEDED"
	Declined  Status = "FAILED"
)

// Result is a channel's definitive answer to one payment.
type Result struct {
	Status  Status
	TradeNo string
	// DeclineCode and DeclineReason explain a Declined payment.
	DeclineCode   string
	DeclineReason string
}

// ErrTimeout means the channel did not answer in time: the payment may or may
// not have been made. Callers record the outcome as unknown and never retry
// blindly.
var ErrTimeout = errors.New("channel: no answer in time; outcome unknown")

// ErrNotSent means the payment provably never reached the channel: the
// connection was refused before anything was sent, or the channel's health
// breaker refused the call. Nothing was charged and nothing can be: the
// caller may settle the payment as not sent, or send it elsewhere. A
// Channel returns it (errors.Is) only when it is certain; any doubt is
// ErrTimeout or a transport error, whose outcome is unknown.
var ErrNotSent = errors.New("channel: the payment was not sent")

// SystemError is a channel's explicit refusal to process a payment because of
// its own fault (for example "system busy"). Nothing was charged.
type SystemError struct {
	Channel string
	Code    string
	Message string
}

func (e *SystemError) Error() string {
	return fmt.Sprintf("channel %s system error %s: %s", e.Channel, e.Code, e.Message)
}

// Channel is one payment channel. Pay must honour ctx: when ctx ends before
// the channel answers, Pay returns ErrTimeout.
type Channel interface {
	Code() string
	Pay(ctx context.Context, req Request) (Result, error)
}

// Registry holds the configured channels by code. It is immutable.
type Registry struct {
	byCode map[string]Channel
	codes  []string
}

// NewRegistry returns a registry of chs. Codes must be unique and non-empty.
func NewRegistry(chs ...Channel) (*Registry, error) {
	r := &Registry{byCode: make(map[string]Channel, len(chs))}
	for _, ch := range chs {
		if ch == nil || ch.Code() == "" {
			return nil, errors.New("channel: nil channel or empty code")
		}
		if _, dup := r.byCode[ch.Code()]; dup {
			return nil, fmt.Errorf("channel: %s configured twice", ch.Code())
		}
		r.byCode[ch.Code()] = ch
		r.codes = append(r.codes, ch.Code())
	}
	sort.Strings(r.codes)
	return r, nil
}

// Get returns the channel with code, if configured.
func (r *Registry) Get(code string) (Channel, bool) {
	ch, ok := r.byCode[code]
	return ch, ok
}

// Codes returns the configured codes, sorted.
func (r *Registry) Codes() []string { return append([]string(nil), r.codes...) }

// Processing is a channel's answer that it has the payment and has not
// decided yet: the outcome is unknown until a query (or a notification)
// tells it.
const Processing Status = "PROCESSING"

// ThrottledError is a channel's refusal to process a payment because it is
// too busy (a gateway's THROTTLED): nothing was charged and nothing can be,
// so it is ErrNotSent (errors.Is) and the payment may go elsewhere.
// RetryAfter is the channel's own wait, zero when it gave none.
type ThrottledError struct {
	Channel    string
	RetryAfter time.Duration
}

func (e *ThrottledError) Error() string {
	if e.RetryAfter > 0 {
		return fmt.Sprintf("channel %s throttled the payment (retry after %v)", e.Channel, e.RetryAfter)
	}
	return fmt.Sprintf("channel %s throttled the payment", e.Channel)
}

// Is makes a ThrottledError match ErrNotSent.
func (e *ThrottledError) Is(target error) bool { return target == ErrNotSent }

// ErrNotFound is a query's answer that the channel has no such order. It
// is not proof that the payment was never sent: the request may still be
// on its way. Close the order to learn that.
var ErrNotFound = errors.New("channel: no such order")

// CloseResult is a channel's answer to closing an order: after it the
// channel never processes the order. Processed false proves it never did;
// Processed true comes with the payment's outcome (Result).
type CloseResult struct {
	Processed bool
	Result    Result
}

// Lookup is a channel that can be asked about an order it may have: the
// resolver of unknown outcomes uses it. Query answers the order's outcome
// (Status Succeeded, Declined or Processing) or ErrNotFound; Close closes
// it. Any other error means nothing was learnt.
type Lookup interface {
	Query(ctx context.Context, req Request) (Result, error)
	Close(ctx context.Context, req Request) (CloseResult, error)
}
