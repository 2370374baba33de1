package emulator

import (
	"time"

	"payserver/internal/channel/gateway"
)

// Order is what the emulator remembers of one order on one channel: its
// idempotency memory, kept in the ledger's file. An order is remembered
// once it was processed (a payment decided) or closed; a THROTTLED,
// refused, dropped or failed call leaves no Order.
type Order struct {
	Channel   string
	OrderNo   string
	RequestID string
	Amount    int64
	Currency  string
	// Outcome is the payment's final outcome, gateway.Succeeded or
	// gateway.Declined, decided when the payment was processed; empty
	// when it never was (a closed order).
	Outcome gateway.Outcome
	// TradeNo is the trade number of a SUCCEEDED payment.
	TradeNo string
	// Code and Reason say why a payment was DECLINED.
	Code   string
	Reason string
	// RevealAt is when the gateway stops answering PROCESSING about the
	// payment and tells its Outcome; the zero time is at once.
	RevealAt time.Time
	// Closed: after a close the gateway never processes the order.
	Closed bool
}

// Processed reports whether the payment was processed (its Outcome
// decided, revealed or not).
func (o Order) Processed() bool { return o.Outcome != "" }

// MoneyMoved reports whether the payment charged money.
func (o Order) MoneyMoved() bool { return o.Outcome == gateway.Succeeded }

// Revealed reports whether answers about the processed order tell its
// outcome at now (not PROCESSING).
func (o Order) Revealed(now time.Time) bool { return !now.Before(o.RevealAt) }

// Final is the order's final outcome as an answer (as a notification
// carries it).
func (o Order) Final() gateway.Answer {
	a := gateway.Answer{OrderNo: o.OrderNo, Outcome: o.Outcome}
	switch o.Outcome {
	case gateway.Succeeded:
		a.TradeNo = o.TradeNo
	case gateway.Declined:
		a.Code, a.Reason = o.Code, o.Reason
	}
	return a
}

// Status is what a replayed pay or a query answers about a processed
// order at now: PROCESSING until it is revealed, then its final outcome.
func (o Order) Status(now time.Time) gateway.Answer {
	if !o.Revealed(now) {
		return gateway.Answer{OrderNo: o.OrderNo, Outcome: gateway.Processing}
	}
	return o.Final()
}

// CloseAnswer is the answer to closing o: whether it had been processed
// and, if so, its outcome.
func (o Order) CloseAnswer() gateway.Answer {
	a := gateway.Answer{OrderNo: o.OrderNo, Outcome: gateway.Closed, Processed: o.Processed()}
	if a.Processed {
		a.Result = o.Outcome
	}
	return a
}

// closedAt is o after a close at now: closed, and a pending PROCESSING
// revealed (the close's answer has told the outcome).
func (o Order) closedAt(now time.Time) Order {
	o.Closed = true
	if o.Processed() && !o.Revealed(now) {
		o.RevealAt = now
	}
	return o
}
