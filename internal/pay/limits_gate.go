package pay

import (
	"context"
	"errors"
	"time"

	"payserver/internal/apperr"
	"payserver/internal/ratelimit"
)

// LimitsGate is a Limiter that admits nothing until the first limits
// document is in force: before it, no payment is served (fail-safe start),
// whatever the limiter would answer for a key it knows no rule of. Every
// check then answers DEPENDENCY_UNAVAILABLE with details.dependency
// "limits" and details.source naming the limits source ("nacos", "file").
// Once loaded is closed, checks go to the wrapped limiter.
type LimitsGate struct {
	limiter Limiter
	loaded  <-chan struct{}
	source  string
}

// NewLimitsGate wraps limiter; loaded is closed once the first limits
// document is in force (configcenter.Manager.Loaded), source names the
// limits source for the error.
func NewLimitsGate(limiter Limiter, loaded <-chan struct{}, source string) (*LimitsGate, error) {
	if limiter == nil || loaded == nil || source == "" {
		return nil, errors.New("pay: limits gate needs a limiter, a loaded channel and a source name")
	}
	return &LimitsGate{limiter: limiter, loaded: loaded, source: source}, nil
}

// Check implements Limiter.
func (g *LimitsGate) Check(ctx context.Context, r ratelimit.Request) (ratelimit.Decision, error) {
	if err := g.NotLoaded(); err != nil {
		return ratelimit.Decision{Key: r.Key}, err
	}
	return g.limiter.Check(ctx, r)
}

// NotLoaded returns the gate's DEPENDENCY_UNAVAILABLE error until the first
// limits document is in force, and nil from then on.
func (g *LimitsGate) NotLoaded() error {
	select {
	case <-g.loaded:
		return nil
	default:
		return apperr.New(apperr.DependencyUnavailable,
			"no limits document has been loaded yet from the %s source; payments are refused until a valid one is", g.source).
			WithDetails(map[string]any{"dependency": "limits", "source": g.source})
	}
}

// Release implements Limiter.
func (g *LimitsGate) Release(ctx context.Context, h ratelimit.Hold) error {
	return g.limiter.Release(ctx, h)
}

// Peek asks the wrapped limiter, which must be able to peek (a
// *ratelimit.Limiter, or anything with its Peek), once the first limits
// document is in force; before, it answers DEPENDENCY_UNAVAILABLE like a
// check.
func (g *LimitsGate) Peek(ctx context.Context, r ratelimit.Request) (ratelimit.Decision, error) {
	select {
	case <-g.loaded:
	default:
		return g.Check(ctx, r)
	}
	p, ok := g.limiter.(interface {
		Peek(context.Context, ratelimit.Request) (ratelimit.Decision, error)
	})
	if !ok {
		return ratelimit.Decision{Key: r.Key}, errors.New("pay: the gated limiter cannot peek")
	}
	return p.Peek(ctx, r)
}

// Throttled implements Limiter.
func (g *LimitsGate) Throttled(ctx context.Context, h ratelimit.Hold, retryAfter time.Duration) error {
	return g.limiter.Throttled(ctx, h, retryAfter)
}

// ReleaseAmount implements Limiter.
func (g *LimitsGate) ReleaseAmount(ctx context.Context, h ratelimit.Hold) error {
	return g.limiter.ReleaseAmount(ctx, h)
}
