package ratelimit_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"payserver/internal/limits"
	"payserver/internal/ratelimit"
)

// checked records what a CheckObserver is told.
type checked struct {
	mu  sync.Mutex
	got []string
}

func (c *checked) Checked(r ratelimit.Request, d ratelimit.Decision, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := r.Caller + " " + r.Member + " "
	switch {
	case err != nil:
		s += "failed"
	case d.Allowed:
		s += "admitted"
	default:
		s += "limited"
	}
	c.got = append(c.got, s)
}

func (c *checked) list() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.got...)
}

// TestChecksObserver: the limiter tells Options.Checks of each check of a
// request that names its caller, once per call and after its wait, and of
// no other: not of a request without a caller, nor of a check refused
// before the first limits document (Options.NotLoaded).
func TestChecksObserver(t *testing.T) {
	obs := &checked{}
	errNotLoaded := errors.New("no limits yet")
	l, err := ratelimit.New(ratelimit.NewLocalStore(nil), ratelimit.Options{DisableNearCache: true, Checks: obs,
		NotLoaded: func() error { return errNotLoaded }})
	if err != nil {
		t.Fatal(err)
	}
	key := ratelimit.Key{BizType: "B", Channel: "C"}
	ctx := context.Background()
	if _, err := l.Check(ctx, ratelimit.Request{Key: key, Member: "early", Caller: "pay"}); !errors.Is(err, errNotLoaded) {
		t.Fatalf("check before the limits: %v, want NotLoaded's error", err)
	}
	parsed, err := limits.Parse([]byte("limits:\n  B:C: {limit: 1, window: 300ms}\n"))
	if err != nil {
		t.Fatal(err)
	}
	l.SetConfig(parsed.Config)
	if d, err := l.Check(ctx, ratelimit.Request{Key: key, Member: "anon"}); err != nil || !d.Allowed {
		t.Fatalf("anon: allowed %v, %v", d.Allowed, err)
	}
	if d, err := l.Check(ctx, ratelimit.Request{Key: key, Member: "refused", Caller: "pay"}); err != nil || d.Allowed {
		t.Fatalf("refused: allowed %v, %v; want a refusal", d.Allowed, err)
	}
	// Refused at first, then admitted after the window slides: one call.
	if d, err := l.Check(ctx, ratelimit.Request{Key: key, Member: "waiter", Caller: "pay", MaxWait: 2 * time.Second}); err != nil || !d.Allowed {
		t.Fatalf("waiter: allowed %v, %v; want admitted after waiting", d.Allowed, err)
	}
	want := []string{"pay refused limited", "pay waiter admitted"}
	if got := obs.list(); len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("told %q, want %q", got, want)
	}
}
