package witness

import (
	"encoding/json"
	"fmt"
)

// processed says whether a ledger line is the channel processing a pay: it
// decided it (SUCCEEDED, DECLINED, PROCESSING, also when the answer was then
// lost). THROTTLED, ERROR, NONE (refused, dropped) and a pay after a close
// (DECLINED ORDER_CLOSED) were not processed (api/channel-gateway.yaml,
// README.md "The channel emulator").
func processed(e *LedgerEntry) bool {
	if e.Op != "pay" {
		return false
	}
	switch e.Outcome {
	case "SUCCEEDED", "PROCESSING":
		return true
	case "DECLINED":
		return e.Code != "ORDER_CLOSED"
	}
	return e.MoneyMoved
}

func isNotSent(o *Order) bool { return o.Status == "FAILED" && o.FailureCode == "NOT_SENT" }

// checkMoney checks properties 1 and 2 against the emulator's ledger.
func (c *checker) checkMoney() {
	for _, rid := range sortedKeys(c.ledgerByReq) {
		lines := c.ledgerByReq[rid]
		order := c.ordersByReq[rid]
		// One processing per channel and orderNo at most: the gateway is
		// idempotent there, so a repeat of the same pay is not a second one.
		type call struct{ channel, orderNo string }
		calls := map[call]*LedgerEntry{}
		var moved []*LedgerEntry
		var firstCalls []*LedgerEntry
		for _, e := range lines {
			if processed(e) {
				k := call{e.Channel, e.OrderNo}
				if calls[k] == nil {
					calls[k] = e
					firstCalls = append(firstCalls, e)
				}
			}
			if e.MoneyMoved {
				moved = append(moved, e)
			}
		}
		if len(firstCalls) > 1 {
			c.report(Violation{Property: SinglePay, RequestID: rid,
				Message: fmt.Sprintf("the channels processed %d pays of one requestId", len(firstCalls)),
				Excerpt: ledgerExcerpt(firstCalls)})
		}
		if len(moved) > 1 && len(firstCalls) <= 1 {
			c.report(Violation{Property: SinglePay, RequestID: rid,
				Message: fmt.Sprintf("money moved %d times for one requestId", len(moved)),
				Excerpt: ledgerExcerpt(moved)})
		}
		switch {
		case len(moved) > 0 && order == nil:
			c.report(Violation{Property: SinglePay, RequestID: rid, Message: "money moved for a requestId that has no order",
				Excerpt: ledgerExcerpt(moved[:1])})
		case len(moved) > 0 && order.Status == "FAILED":
			c.report(Violation{Property: SinglePay, RequestID: rid,
				Message: fmt.Sprintf("money moved for an order payserver ended FAILED %s", order.FailureCode),
				Excerpt: append([]string{excerpt(Record{Order: order})}, ledgerExcerpt(moved[:1])...)})
		case len(firstCalls) > 0 && order != nil && isNotSent(order):
			c.report(Violation{Property: DurableOutcome, RequestID: rid,
				Message: "the channel processed a pay of an order payserver ended NOT_SENT (never sent)",
				Excerpt: append([]string{excerpt(Record{Order: order})}, ledgerExcerpt(firstCalls[:1])...)})
		}
	}
	c.checkWire()
	for i := range c.h.Orders {
		c.checkOrderAgainstLedger(&c.h.Orders[i])
	}
	for i := range c.h.Ops {
		c.checkAnswer(&c.h.Ops[i])
	}
}

// checkOrderAgainstLedger: after the quiet period every order is final,
// and SUCCEEDED exactly when its channel moved the money for its orderNo.
func (c *checker) checkOrderAgainstLedger(o *Order) {
	rec := func() string { return excerpt(Record{Order: o}) }
	switch o.Status {
	case "PROCESSING", "UNKNOWN":
		c.report(Violation{Property: DurableOutcome, RequestID: o.RequestID,
			Message: fmt.Sprintf("order left %s after the quiet period", o.Status), Excerpt: []string{rec()}})
		return
	case "SUCCEEDED":
		var paid *LedgerEntry
		for _, e := range c.ledgerByReq[o.RequestID] {
			if e.MoneyMoved && e.Channel == o.Channel && e.OrderNo == o.OrderNo {
				paid = e
			}
		}
		switch {
		case paid == nil:
			c.report(Violation{Property: DurableOutcome, RequestID: o.RequestID,
				Message: "order SUCCEEDED but its channel's ledger moved no money for it", Excerpt: []string{rec()}})
		case paid.Amount != o.Amount || paid.Currency != o.Currency:
			c.report(Violation{Property: DurableOutcome, RequestID: o.RequestID,
				Message: "order and ledger disagree on the amount", Excerpt: []string{rec(), excerpt(Record{Ledger: paid})}})
		case paid.TradeNo != "" && o.ChannelTradeNo != "" && paid.TradeNo != o.ChannelTradeNo:
			c.report(Violation{Property: DurableOutcome, RequestID: o.RequestID,
				Message: "order and ledger disagree on the trade number", Excerpt: []string{rec(), excerpt(Record{Ledger: paid})}})
		}
	case "FAILED":
	default:
		c.report(Violation{Property: DurableOutcome, RequestID: o.RequestID,
			Message: fmt.Sprintf("order has an unknown status %q", o.Status), Excerpt: []string{rec()}})
	}
}

// answer is the part of a 2xx POST /pay or GET /pay answer (an Order of
// api/openapi.yaml) the witness compares.
type answer struct {
	OrderNo     string `json:"orderNo"`
	RequestID   string `json:"requestId"`
	Channel     string `json:"channel"`
	Amount      int64  `json:"amount"`
	Currency    string `json:"currency"`
	Status      string `json:"status"`
	FailureCode string `json:"failureCode"`
}

// checkAnswer: a 2xx to a client has a durable order that agrees with it.
// A final answer (SUCCEEDED, FAILED) is the order's final state; UNKNOWN
// and PROCESSING may be resolved later.
func (c *checker) checkAnswer(op *Op) {
	if (op.Kind != "pay" && op.Kind != "getPay") || op.Status < 200 || op.Status > 299 {
		return
	}
	rec := func() string { return excerpt(Record{Op: op}) }
	o := c.ordersByReq[op.RequestID]
	if o == nil {
		c.report(Violation{Property: DurableOutcome, RequestID: op.RequestID,
			Message: fmt.Sprintf("%s answered %d but no order has this requestId", op.Kind, op.Status), Excerpt: []string{rec()}})
		return
	}
	var a answer
	if err := json.Unmarshal(op.Body, &a); err != nil {
		c.report(Violation{Property: HistoryError, RequestID: op.RequestID, Message: "a 2xx answer's body is not an order: " + err.Error(), Excerpt: []string{rec()}})
		return
	}
	var why string
	switch {
	case a.OrderNo != "" && a.OrderNo != o.OrderNo:
		why = "answered another orderNo than the order's"
	case a.Amount != 0 && (a.Amount != o.Amount || a.Currency != o.Currency):
		why = "answered another amount than the order's"
	case op.Kind == "pay" && op.Amount != 0 && (op.Amount != o.Amount || op.Currency != o.Currency):
		why = "the order's amount is not the one the client sent"
	case (a.Status == "SUCCEEDED" || a.Status == "FAILED") && a.Status != o.Status:
		why = fmt.Sprintf("answered %s, the order ended %s", a.Status, o.Status)
	case a.Status == "FAILED" && a.FailureCode != o.FailureCode:
		why = fmt.Sprintf("answered FAILED %s, the order ended FAILED %s", a.FailureCode, o.FailureCode)
	}
	if why != "" {
		c.report(Violation{Property: DurableOutcome, RequestID: op.RequestID, Message: why, Excerpt: []string{rec(), excerpt(Record{Order: o})}})
	}
}

// checkWire checks one-pay-on-the-wire (docs/DESIGN.md "POST /pay": "the
// channel is called at most once per requestId"): the ledger
// holds at most one pay line per requestId and channel, whatever its
// outcome. A line is a request the channel received, so a second one is a
// repeat on the wire, even when the gateway's idempotency made it harmless.
func (c *checker) checkWire() {
	for _, rid := range sortedKeys(c.ledgerByReq) {
		byChannel := map[string][]*LedgerEntry{}
		var channels []string
		for _, e := range c.ledgerByReq[rid] {
			if e.Op != "pay" {
				continue
			}
			if byChannel[e.Channel] == nil {
				channels = append(channels, e.Channel)
			}
			byChannel[e.Channel] = append(byChannel[e.Channel], e)
		}
		for _, ch := range channels {
			if lines := byChannel[ch]; len(lines) > 1 {
				c.report(Violation{Property: OnePayOnTheWire, Key: ch, RequestID: rid,
					Message: fmt.Sprintf("the channel received %d pay requests for one requestId", len(lines)),
					Excerpt: ledgerExcerpt(lines)})
			}
		}
	}
}

func ledgerExcerpt(es []*LedgerEntry) []string {
	out := make([]string, 0, len(es))
	for _, e := range es {
		out = append(out, excerpt(Record{Ledger: e}))
	}
	return out
}
