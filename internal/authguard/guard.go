// Package authguard slows the guessing of secrets: after MaxFailures
// failed authentications from one address within Window of the first,
// that address is refused until the Window is over, whatever it sends.
// The HTTP API (admin bearer token, dashboard login, client tokens) and
// the gRPC service share one Guard, so a guesser gets MaxFailures tries a
// minute in all.
package authguard

import (
	"net"
	"sync"
	"time"
)

// MaxFailures is how many failed authentications from one address a
// Window allows by default; the next attempt is refused.
const MaxFailures = 10

// Window is how long an address's failures count, from its first.
const Window = time.Minute

// MaxAddresses bounds the addresses tracked. When it is reached, the
// addresses whose window is over are forgotten; if none is, a new address
// is not tracked (its failures go uncounted until there is room).
const MaxAddresses = 100_000

// Observer is told of each failure and each refusal, by surface ("admin",
// "login", "client", "grpc"). It must not block.
type Observer interface {
	AuthFailed(surface string)
	AuthRefused(surface string)
}

// Options configures a Guard. The zero value is usable.
type Options struct {
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// MaxFailures is the failures an address may have in a Window before
	// it is refused. Default (0) MaxFailures; tests of other refusals set
	// it high.
	MaxFailures int
	Observer    Observer
}

// Guard counts failed authentications per address. It is safe for
// concurrent use.
type Guard struct {
	opts Options
	mu   sync.Mutex
	m    map[string]*window
}

type window struct {
	start    time.Time
	failures int
}

// New returns a Guard.
func New(opts Options) *Guard {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.MaxFailures <= 0 {
		opts.MaxFailures = MaxFailures
	}
	return &Guard{opts: opts, m: map[string]*window{}}
}

// host is the address without its port: one client, whatever port it
// connects from.
func host(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}

// Blocked returns how long addr ("host:port" or a host) stays refused, or
// 0 when it may try to authenticate.
func (g *Guard) Blocked(addr string) time.Duration {
	now := g.opts.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	w := g.m[host(addr)]
	if w == nil || w.failures < g.opts.MaxFailures {
		return 0
	}
	if left := w.start.Add(Window).Sub(now); left > 0 {
		return left
	}
	return 0
}

// Refused tells the Observer that surface refused a blocked address.
func (g *Guard) Refused(surface string) {
	if g.opts.Observer != nil {
		g.opts.Observer.AuthRefused(surface)
	}
}

// Failed records a failed authentication from addr on surface.
func (g *Guard) Failed(addr, surface string) {
	if g.opts.Observer != nil {
		g.opts.Observer.AuthFailed(surface)
	}
	now := g.opts.Now()
	h := host(addr)
	g.mu.Lock()
	defer g.mu.Unlock()
	w := g.m[h]
	if w != nil && !now.Before(w.start.Add(Window)) {
		w = nil // the last window is over: a new one starts
	}
	if w == nil {
		if len(g.m) >= MaxAddresses && !g.prune(now) {
			return
		}
		w = &window{start: now}
		g.m[h] = w
	}
	w.failures++
}

// prune forgets the addresses whose window is over; false when none was.
// g.mu is held.
func (g *Guard) prune(now time.Time) bool {
	before := len(g.m)
	for h, w := range g.m {
		if !now.Before(w.start.Add(Window)) {
			delete(g.m, h)
		}
	}
	return len(g.m) < before
}

func (g *Guard) tracked() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.m)
}
