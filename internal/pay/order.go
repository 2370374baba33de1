package pay

import (
	"context"
	"errors"
	"time"
)

// Status is an order's state. Only PROCESSING changes later.
type Status string

// Order states.
const (
	// StatusProcessing: the requestId is claimed and the channel call is in
	// flight, or its outcome has not been recorded yet. The stale-order
	// sweeper turns an old PROCESSING order into UNKNOWN.
	StatusProcessing Status = "PROCESSING"
	// StatusSucceeded: the channel confirmed the payment.
	StatusSucceeded Status = "SUCCEEDED"
	// StatusFailed: the channel declined, or refused with a system error.
	StatusFailed Status = "FAILED"
	// StatusUnknown: the channel did not answer in time. The payment may or
	// may not have happened; it is never retried blindly and must be
	// reconciled with the channel.
	StatusUnknown Status = "UNKNOWN"
)

// Order is one payment, stored durably before and after the channel call.
type Order struct {
	OrderNo        string
	RequestID      string
	RequestHash    string
	BizType        string
	Channel        string
	MerchantID     string
	Amount         int64
	Currency       string
	Subject        string
	Status         Status
	ChannelTradeNo string
	// FailureCode is the decline code, or apperr.ChannelError's code when the
	// channel refused with a system error.
	FailureCode    string
	FailureMessage string
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

// Errors an OrderStore returns; any other error means the store failed.
var (
	ErrOrderNotFound  = errors.New("pay: order not found")
	ErrDuplicateOrder = errors.New("pay: an order with this requestId exists")
)

// OrderStore keeps orders durably. internal/repo implements it on gorm.
type OrderStore interface {
	// Get returns the order with requestID, or ErrOrderNotFound.
	Get(ctx context.Context, requestID string) (*Order, error)
	// Create inserts a new order. It returns ErrDuplicateOrder when the
	// requestId (unique in the store) is taken, so concurrent duplicates can
	// never both create an order.
	Create(ctx context.Context, o *Order) error
	// Finish records the channel outcome of an order that is PROCESSING or
	// UNKNOWN: status, trade number, failure code and message, UpdatedAt.
	// It returns ErrOrderNotFound when no such order is left to finish.
	Finish(ctx context.Context, o *Order) error
	// MarkStaleUnknown turns PROCESSING orders last updated before cutoff
	// into UNKNOWN and returns how many it changed.
	MarkStaleUnknown(ctx context.Context, cutoff time.Time) (int64, error)
	// Ping reports whether the store answers.
	Ping(ctx context.Context) error
}
