package pay

import (
	"fmt"
	"time"

	"payserver/internal/apperr"
	"payserver/internal/iso4217"
	"payserver/internal/ratelimit"
)

// LimitedError is the one REQUEST_LIMITED error, for POST /pay and for
// /v1/limits/acquire alike: the binding window in Details and the time
// until it has room in RetryAfter (the Retry-After header).
//
// Details name the request's bizType and channel and the binding rule:
// rule (its kind, such as "count/1s" or "amount/day"), limit (a count
// rule's cap) or amount (an amount rule's cap, in minor units), used (what
// the window holds), windowMs (a sliding window's length), scope (the
// channel-wide key "*:CHANNEL" when its window binds) and retryAfterMs (for
// a calendar window, the time until the next period starts). When a
// merchant's limit binds (limits per merchant), scope is "merchant",
// merchantId names the merchant ("-" for a request naming none), limit,
// amount and used are that merchant's own in the window, and the wait is
// until that merchant's own use falls. An amount
// rule also names requestAmount (what the request pays), remaining (what is
// left of the cap) and currency (the request's). Each amount is also a
// decimal string in major units, <field>Major (amountMajor, usedMajor,
// remainingMajor in the cap's currency, requestAmountMajor in the
// request's), when its currency has one; the message writes amounts in
// major units with their currency (iso4217.Text).
//
// A closed key (limit 0) says details.closed. When a schedule opens it
// again, the answer has details.closedUntil (RFC 3339) and a Retry-After
// until then; a key closed by its base rules has neither, so that clients
// do not poll it. Nor does the refusal of an amount larger
// than the cap of its amount window: it says details.exceedsCap, as no wait
// makes it fit. A decision taken in process while Redis fails (degraded)
// names this instance's share of the window as its limit or amount.
func LimitedError(key ratelimit.Key, d ratelimit.Decision) *apperr.Error {
	rule := d.Rule
	if rule == "" && d.Window > 0 {
		rule = ratelimit.Window{Size: d.Window, Amount: d.Amount}.Name()
	}
	// Built without fmt and with room for every detail: this is every 429.
	e := &apperr.Error{Code: apperr.RequestLimited, Message: "channel " + key.Channel + " is at its limit for " + key.BizType}
	if rule != "" {
		e.Message += " (" + rule + ")"
	}
	e.Details = make(map[string]any, 8)
	e.Details["bizType"] = key.BizType
	e.Details["channel"] = key.Channel
	e.Details["used"] = d.Count
	if rule != "" {
		e.Details["rule"] = rule
	}
	capCurrency := ""
	if d.Amount {
		// The cap, and what this request asks of it against what is left.
		e.Details["amount"] = d.Limit
		e.Details["requestAmount"] = d.RequestAmount
		e.Details["remaining"] = max(d.Limit-d.Count, 0)
		if d.Currency != "" {
			e.Details["currency"] = d.Currency
		}
		capCurrency = bindingCurrency(d, rule)
		for field, n := range map[string]int64{"amount": d.Limit, "used": d.Count, "remaining": max(d.Limit-d.Count, 0)} {
			if m, ok := iso4217.Major(n, capCurrency); ok {
				e.Details[field+"Major"] = m
			}
		}
		if m, ok := iso4217.Major(d.RequestAmount, d.Currency); ok {
			e.Details["requestAmountMajor"] = m
		}
	} else {
		e.Details["limit"] = d.Limit
		if d.Learned {
			// The channel throttled: every instance admits less until the
			// learned limit climbs back to the configured one.
			e.Details["learned"], e.Details["configuredLimit"] = true, d.Configured
			e.Message += ": limit learned from the channel's throttling"
		}
	}
	if d.Window > 0 {
		e.Details["windowMs"] = d.Window.Milliseconds()
	}
	if d.Scope.IsChannelWide() {
		e.Details["scope"] = d.Scope.String()
		e.Message = fmt.Sprintf("channel %s is at its channel-wide limit (%s) for %s", key.Channel, rule, key.BizType)
	}
	if d.Merchant != "" {
		e.Details["scope"] = "merchant"
		e.Details["merchantId"] = d.Merchant
		e.Message = fmt.Sprintf("merchant %s is at its limit (%s) of %s", d.Merchant, rule, d.Scope)
	}
	if d.Closed() {
		e.Message = fmt.Sprintf("channel %s is closed for %s", key.Channel, key.BizType)
		if d.Merchant != "" {
			e.Message = fmt.Sprintf("merchant %s is refused on %s (its merchant limit is 0)", d.Merchant, d.Scope)
		}
		e.Details["closed"] = true
		if !d.ClosedUntil.IsZero() {
			// A schedule opens it then: the one closed answer worth a retry.
			e.Message += " until " + d.ClosedUntil.UTC().Format(time.RFC3339)
			e.Details["closedUntil"] = d.ClosedUntil.UTC().Format(time.RFC3339)
			e.RetryAfter = max(d.RetryAfter, time.Millisecond)
			e.Details["retryAfterMs"] = apperr.Ceil(e.RetryAfter, time.Millisecond)
		}
		return e
	}
	// Decided in process while Redis fails, the limit is this instance's
	// share of what was left, not the cap: a wait can help then.
	if d.ExceedsCap && !d.Degraded() {
		e.Message = fmt.Sprintf("amount %s is above the %s cap %s of channel %s for %s",
			iso4217.Text(d.RequestAmount, d.Currency), rule, iso4217.Text(d.Limit, capCurrency), key.Channel, key.BizType)
		if d.Merchant != "" {
			e.Message = fmt.Sprintf("amount %s is above merchant %s's %s cap %s of %s",
				iso4217.Text(d.RequestAmount, d.Currency), d.Merchant, rule, iso4217.Text(d.Limit, capCurrency), d.Scope)
		}
		e.Details["exceedsCap"] = true
		return e
	}
	if d.Amount && !d.Scope.IsChannelWide() && d.Merchant == "" && d.RequestAmount > 0 {
		e.Message = fmt.Sprintf("amount %s does not fit the %s cap %s of channel %s for %s: %s used, %s left",
			iso4217.Text(d.RequestAmount, d.Currency), rule, iso4217.Text(d.Limit, capCurrency), key.Channel, key.BizType,
			iso4217.Text(d.Count, capCurrency), iso4217.Text(max(d.Limit-d.Count, 0), capCurrency))
	}
	// A refusal always has a time to retry at; at least 1ms, as the
	// answer promises.
	e.RetryAfter = max(d.RetryAfter, time.Millisecond)
	e.Details["retryAfterMs"] = apperr.Ceil(e.RetryAfter, time.Millisecond)
	return e
}

// bindingCurrency is the currency of d's binding amount window (named
// rule, of d.Scope): "" for a window that counts every currency, whose sum
// has no major unit. A window of one currency binds only requests in it,
// so without the windows reported (d.Windows nil) it is the request's.
func bindingCurrency(d ratelimit.Decision, rule string) string {
	for _, w := range d.Windows {
		if w.Amount && w.Scope == d.Scope && w.Name() == rule {
			return w.Currency
		}
	}
	return d.Currency
}

// ConflictError is the IDEMPOTENCY_CONFLICT answer to a check whose
// requestId the limiter holds with another amount: a member's identity is
// its requestId and its amount, so a retry with another amount is neither
// admitted at the old amount nor counted again.
func ConflictError(key ratelimit.Key, requestID string, amount int64) *apperr.Error {
	return apperr.New(apperr.IdempotencyConflict,
		"requestId %s already holds a slot on channel %s for another amount; retry with the amount it was first sent with, or use a new requestId", requestID, key.Channel).
		WithDetails(map[string]any{"requestId": requestID, "bizType": key.BizType, "channel": key.Channel, "amount": amount})
}

// throttledMessage is the failure message of a pinned payment its channel
// throttled (THROTTLED): stored FAILED NOT_SENT, answered 429.
const throttledMessage = "the channel throttled the payment (busy); it was not processed and nothing was charged"

// defaultThrottleWait is the Retry-After of a channel's throttling when the
// channel gave none.
const defaultThrottleWait = time.Second

// channelThrottledError is the answer to a pinned payment its channel
// throttled: 429 REQUEST_LIMITED with details.reason channelThrottled. The
// order is final (FAILED NOT_SENT, its slot released): a retry needs a new
// requestId. The first answer (first true) carries a Retry-After (the
// channel's wait, or a second) for that new request; a replay of the same
// requestId carries none, so that a client retrying it is not told to
// come back for ever.
func channelThrottledError(o *Order, wait time.Duration, first bool) *apperr.Error {
	details := map[string]any{"reason": "channelThrottled", "bizType": o.BizType, "channel": o.Channel, "orderNo": o.OrderNo}
	e := apperr.New(apperr.RequestLimited, "channel %s throttled the payment: nothing was charged; retry with a new requestId", o.Channel).
		WithDetails(details)
	if first {
		if wait <= 0 {
			wait = defaultThrottleWait
		}
		details["retryAfterMs"] = wait.Milliseconds()
		e.RetryAfter = wait
	}
	return e
}
