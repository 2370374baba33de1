package pay

import (
	"context"
	"errors"
	"time"

	"payserver/internal/ratelimit"
)

// Status is an order's stored status. Only PROCESSING and UNKNOWN change
// later; State and Allowed give the exact rules.
type Status string

// Order states.
const (
	// StatusProcessing: the requestId is claimed by the request that wrote
	// the row (its OrderNo). That request calls the channel, or has called
	// it, or abandons the payment before the call (FAILED with
	// FailureNotSent). The stale-order sweeper turns an old PROCESSING order
	// into UNKNOWN: it cannot tell a claim whose owner died before the call
	// from one whose owner died during it.
	StatusProcessing Status = "PROCESSING"
	// StatusSucceeded: the channel confirmed the payment.
	StatusSucceeded Status = "SUCCEEDED"
	// StatusFailed: the channel declined, or refused with a system error, or
	// (FailureNotSent) the payment was abandoned before the channel was
	// called. Nothing was charged.
	StatusFailed Status = "FAILED"
	// StatusUnknown: the channel may have been called and its outcome is not
	// known. The payment may or may not have happened; it is never retried
	// blindly and must be reconciled with the channel.
	StatusUnknown Status = "UNKNOWN"
)

// FailureNotSent is the failure code of a FAILED order whose payment was
// abandoned after its claim committed and before the channel was called:
// the channel never saw it, and never will (the requestId stays taken).
const FailureNotSent = "NOT_SENT"

// State is an order's place in its life, finer than Status: it tells a
// payment that provably never reached the channel (NotSent) from one the
// channel declined (Failed). StateNone is "no row".
type State string

// Order life states. See Allowed for the transitions between them.
const (
	StateNone       State = "NONE"       // no order: the requestId is free
	StateProcessing State = "PROCESSING" // claimed; the call is pending, in flight, or unrecorded
	StateSucceeded  State = "SUCCEEDED"  // the channel confirmed
	StateFailed     State = "FAILED"     // the channel declined or refused
	StateNotSent    State = "NOT_SENT"   // FAILED, abandoned before the channel call
	StateUnknown    State = "UNKNOWN"    // may have been sent; outcome unknown
)

// States lists every State, StateNone first.
var States = []State{StateNone, StateProcessing, StateSucceeded, StateFailed, StateNotSent, StateUnknown}

// StateOf returns the State of o; a nil order is StateNone.
func StateOf(o *Order) State {
	switch {
	case o == nil:
		return StateNone
	case o.Status == StatusFailed && o.FailureCode == FailureNotSent:
		return StateNotSent
	default:
		return State(o.Status)
	}
}

// transitions is the order state machine; docs/DESIGN.md ("Order life")
// has the same table. Every write names the order by its OrderNo too, so
// only the request that claimed an order moves it on, except the stale
// sweeper, which moves only PROCESSING to UNKNOWN.
var transitions = map[State][]State{
	// The claim: one INSERT, unique by requestId.
	StateNone: {StateProcessing},
	// The owner records the channel's outcome (SUCCEEDED, FAILED or
	// UNKNOWN), or abandons the payment before calling the channel
	// (NOT_SENT); the sweeper marks a stale claim UNKNOWN.
	StateProcessing: {StateSucceeded, StateFailed, StateNotSent, StateUnknown},
	// The owner records an outcome that arrived after the sweeper's UNKNOWN
	// (or the same UNKNOWN again), or corrects the sweeper's UNKNOWN to
	// NOT_SENT for a claim it knows it never sent.
	StateUnknown: {StateSucceeded, StateFailed, StateNotSent, StateUnknown},
	// SUCCEEDED, FAILED and NOT_SENT are final.
}

// Allowed reports whether an order may go from one state to another.
// Staying in a state is not a transition, except UNKNOWN to UNKNOWN
// (recording the same unknown outcome again).
func Allowed(from, to State) bool {
	for _, s := range transitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

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
	// FailureCode is the decline code, apperr.ChannelError's code when the
	// channel refused with a system error, FailureNotSent when the payment
	// was abandoned before the channel call, or the reason of an UNKNOWN.
	FailureCode    string
	FailureMessage string
	CreatedAt      time.Time
	UpdatedAt      time.Time
	// RoutedFrom is nil for a payment pinned to its channel by the client.
	// For a routed payment (no channel in the request) it is non-nil: the
	// candidates it was not sent to, in order of preference, each with its
	// reason; empty when it went to its first candidate.
	RoutedFrom []RouteSkip
	// Admission is the limiter's record of the slot the payment was
	// admitted into on Channel; zero when none was recorded.
	Admission Admission
	// ResolvedBy says who ended an order whose outcome was unknown:
	// ResolvedByQuery, ResolvedByNotify or ResolvedByClose; empty for an
	// order its own request ended. ResolvedAt is when.
	ResolvedBy string
	ResolvedAt time.Time
	// Discrepancy, when not nil, is a channel's word that contradicted the
	// order once it was final (Resolver.Notify): the channel broke its
	// close guarantee, or answered otherwise than it had. The order keeps
	// its state; the discrepancy is for a person to reconcile.
	Discrepancy *Discrepancy

	// hold is the limiter slot this process took for the payment on
	// Channel, while its flow runs (zero in an order read from the store:
	// holdFor rebuilds it from Admission).
	hold ratelimit.Hold
}

// Admission is what the limiter recorded when it admitted a payment: its
// own time (Redis TIME, µs), the window keys the slot was counted in and
// the limits document in force. Ops answer a channel's "you sent more than
// the limit at 10:03:17" with it.
type Admission struct {
	At            time.Time
	Keys          []string
	LimitsVersion string
}

// Discrepancy is a channel's word contradicting a final order: which
// channel said it, what it reported (SUCCEEDED or DECLINED), its trade
// number, and when payserver heard it first.
type Discrepancy struct {
	Channel  string
	Reported string
	TradeNo  string
	At       time.Time
}

// Who resolved an unknown outcome (Order.ResolvedBy).
const (
	ResolvedByQuery  = "query"
	ResolvedByNotify = "notify"
	ResolvedByClose  = "close"
)

// Errors an OrderStore returns; any other error means the store failed.
var (
	ErrOrderNotFound  = errors.New("pay: order not found")
	ErrDuplicateOrder = errors.New("pay: an order with this requestId exists")
	// ErrNotCommitted marks (errors.Is) a failed write that provably changed
	// nothing: it never reached the database, or the database refused it as
	// a whole. A failed write without it may have been committed.
	ErrNotCommitted = errors.New("pay: the write was not committed")
)

// OrderStore keeps orders durably. internal/repo implements it on gorm.
type OrderStore interface {
	// Get returns the order with requestID, or ErrOrderNotFound.
	Get(ctx context.Context, requestID string) (*Order, error)
	// Create inserts a new order. It returns ErrDuplicateOrder when the
	// requestId (unique in the store) is taken, so concurrent duplicates can
	// never both create an order. Any other error may come after the row was
	// committed, unless it wraps ErrNotCommitted. It sets o.CreatedAt and
	// o.UpdatedAt to what the store keeps (its precision, such as whole
	// microseconds), so an answer built from o equals a later Get's.
	Create(ctx context.Context, o *Order) error
	// Finish records the final state of an order that is PROCESSING or
	// UNKNOWN and has o's RequestID and OrderNo: status, trade number,
	// failure code and message, UpdatedAt. It returns ErrOrderNotFound when
	// no such order is left to finish, and refuses a target state that
	// Allowed forbids from both. It sets o.UpdatedAt to what is stored.
	Finish(ctx context.Context, o *Order) error
	// Reroute moves a PROCESSING order with o's RequestID and OrderNo whose
	// channel is from to o.Channel, with o.RoutedFrom and o.UpdatedAt: a
	// routed payment that provably never reached from goes to its next
	// candidate. It returns ErrOrderNotFound when no such order is left.
	// It sets o.UpdatedAt to what is stored.
	Reroute(ctx context.Context, o *Order, from string) error
	// MarkStaleUnknown turns PROCESSING orders last updated before cutoff
	// into UNKNOWN and returns how many it changed.
	MarkStaleUnknown(ctx context.Context, cutoff time.Time) (int64, error)
	// Ping reports whether the store answers.
	Ping(ctx context.Context) error
}

// ErrBadTransition is returned by Finish for a target state that no
// PROCESSING or UNKNOWN order may move to.
var ErrBadTransition = errors.New("pay: no order may move to that state")

// CheckFinishFrom returns ErrBadTransition unless o may be finished: it is
// PROCESSING or UNKNOWN.
func CheckFinishFrom(o *Order) error {
	if from := StateOf(o); from != StateProcessing && from != StateUnknown {
		return ErrBadTransition
	}
	return nil
}

// CheckFinish returns ErrBadTransition unless an order may be finished
// into o's state from PROCESSING or UNKNOWN. Stores call it first.
func CheckFinish(o *Order) error {
	to := StateOf(o)
	if !Allowed(StateProcessing, to) || !Allowed(StateUnknown, to) {
		return ErrBadTransition
	}
	return nil
}
