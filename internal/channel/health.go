package channel

import (
	"context"
	"errors"
	"fmt"
	"time"

	"payserver/internal/breaker"
)

// HealthOptions tunes the per-channel circuit breakers of Health. Zero
// values select the documented defaults.
type HealthOptions struct {
	// Failures is how many failed calls in a row (transport errors,
	// timeouts, channel system errors; never declines) open a channel's
	// breaker. Default 5.
	Failures int
	// Cooldown is how long an open breaker skips its channel before
	// letting probes through (half-open). Default 30s.
	Cooldown time.Duration
	// Probes is how many calls a half-open breaker lets through at once;
	// that many successes in a row close it, one failure opens it again.
	// Default 1.
	Probes int
	// Now is the breakers' clock. Default time.Now.
	Now func() time.Time
	// OnStateChange, when set, is told of every breaker state change, for
	// logs and metrics.
	OnStateChange func(channel string, from, to breaker.State)
}

// Health tracks whether each channel answers, with one circuit breaker
// (internal/breaker) per channel. Routed payments skip an unhealthy channel
// (open breaker) and go through Call, which counts each outcome. It is safe
// for concurrent use.
type Health struct {
	breakers map[string]*breaker.Breaker
}

// NewHealth returns a Health for the channels codes, all healthy.
func NewHealth(codes []string, opts HealthOptions) *Health {
	if opts.Failures <= 0 {
		opts.Failures = 5
	}
	if opts.Cooldown <= 0 {
		opts.Cooldown = 30 * time.Second
	}
	h := &Health{breakers: make(map[string]*breaker.Breaker, len(codes))}
	for _, code := range codes {
		var onChange func(from, to breaker.State)
		if opts.OnStateChange != nil {
			onChange = func(from, to breaker.State) { opts.OnStateChange(code, from, to) }
		}
		h.breakers[code] = breaker.New(breaker.Options{
			Failures: opts.Failures, Cooldown: opts.Cooldown, Probes: opts.Probes, Now: opts.Now, OnChange: onChange,
		})
	}
	return h
}

// Failed reports whether a channel call's error counts against the
// channel's health: every error (a refused connection, a transport error, a
// timeout, a channel system error) but a throttle. A decline is a Result,
// not an error, and counts as a healthy answer; so does a throttle
// (ThrottledError): the channel answered, busy, and its rate is the
// limiter's business, not the breaker's, which would turn a busy channel
// into one that routed payments skip altogether.
func Failed(err error) bool {
	var throttled *ThrottledError
	return err != nil && !errors.As(err, &throttled)
}

// Unhealthy reports whether code's breaker would refuse a call now: open
// (until its cool-down has passed), or half-open with all its probes in
// flight. Routed payments skip it, rather than take a limiter slot and a
// claim for a call the breaker refuses. An unknown code is healthy.
func (h *Health) Unhealthy(code string) bool {
	b, ok := h.breakers[code]
	return ok && b.Refuses()
}

// RetryAfter returns how long until an unhealthy code's breaker lets a
// probe through (1 ms while its probes are in flight); 0 when it is
// healthy.
func (h *Health) RetryAfter(code string) time.Duration {
	b, ok := h.breakers[code]
	if !ok {
		return 0
	}
	return b.RetryAfter()
}

// States returns each channel's breaker state: "closed", "half-open" or
// "open".
func (h *Health) States() map[string]string {
	out := make(map[string]string, len(h.breakers))
	for code, b := range h.breakers {
		out[code] = b.State().String()
	}
	return out
}

// CallPinned calls ch.Pay for a payment pinned to ch: always, whatever the
// breaker says (health never refuses or reroutes a pinned payment), and
// counts the outcome while the breaker is closed, so that failures of
// pinned traffic open it for routed payments too. While the breaker is
// open or half-open (its probes belong to routed payments) the call is not
// counted.
func (h *Health) CallPinned(ctx context.Context, ch Channel, req Request) (Result, error) {
	b, ok := h.breakers[ch.Code()]
	if !ok || b.IsOpen() {
		return ch.Pay(ctx, req)
	}
	return counted(b, func() (Result, error) { return ch.Pay(ctx, req) })
}

// Call calls ch.Pay through ch's breaker and counts the outcome. When the
// breaker refuses the call (open, or half-open with its probes taken) the
// channel is not called and the error wraps ErrNotSent. A channel without
// a breaker is called directly.
func (h *Health) Call(ctx context.Context, ch Channel, req Request) (Result, error) {
	b, ok := h.breakers[ch.Code()]
	if !ok {
		return ch.Pay(ctx, req)
	}
	if !b.Allow() {
		return Result{}, fmt.Errorf("channel %s is unhealthy (its circuit breaker is %s): %w", ch.Code(), b.State(), ErrNotSent)
	}
	return counted(b, func() (Result, error) { return ch.Pay(ctx, req) })
}

// counted makes call and counts its outcome on b (Failed); a call that
// panics counts as a failure before the panic goes on, so that a probe it
// was is never kept in flight for ever.
func counted(b *breaker.Breaker, call func() (Result, error)) (res Result, err error) {
	answered := false
	defer func() {
		switch {
		case !answered:
			b.Failure()
		case Failed(err):
			b.Failure()
		default:
			b.Success()
		}
	}()
	res, err = call()
	answered = true
	return res, err
}
