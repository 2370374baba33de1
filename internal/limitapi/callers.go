package limitapi

import (
	"sort"
	"sync"

	"payserver/internal/pay"
	"payserver/internal/ratelimit"
)

// PayCaller is the caller name under which POST /pay's own acquisitions are
// counted, beside the clients' token names. No client token may use it.
const PayCaller = pay.LimiterCaller

// CheckCounter counts the limiter's checks of the requests that name their
// caller (ratelimit.Request.Caller: POST /pay's name PayCaller) as
// acquisitions of that caller, beside the clients', which the Service
// counts itself. It is the limiter's ratelimit.Options.Checks.
type CheckCounter struct {
	Observer Observer
}

// Checked implements ratelimit.CheckObserver: an error, or a lost answer
// (an unknown outcome, answered 503), is a failed acquisition, any other
// refusal a limited one.
func (c CheckCounter) Checked(req ratelimit.Request, d ratelimit.Decision, err error) {
	r := ResultAdmitted
	switch {
	case err != nil, d.Unknown:
		r = ResultFailed
	case !d.Allowed:
		r = ResultLimited
	}
	c.Observer.Called(req.Caller, OpAcquire, req.Key, r)
}

// Tally counts operations per caller and result since the process started,
// for the reports and the dashboard. Callers are bounded: token names from
// the configuration and PayCaller. It implements Observer.
type Tally struct {
	mu     sync.Mutex
	counts map[tallyKey]int64
}

type tallyKey struct {
	caller string
	op     Op
	result Result
}

// NewTally returns an empty Tally.
func NewTally() *Tally { return &Tally{counts: map[tallyKey]int64{}} }

// Called implements Observer.
func (t *Tally) Called(client string, op Op, _ ratelimit.Key, r Result) {
	t.mu.Lock()
	t.counts[tallyKey{client, op, r}]++
	t.mu.Unlock()
}

// CallerCounts is what one caller did.
type CallerCounts struct {
	Caller string
	// Acquired and Limited count acquisitions admitted and refused.
	Acquired, Limited int64
	Released, Peeks   int64
	Failed            int64
}

// Snapshot returns the counts per caller, sorted by caller name.
func (t *Tally) Snapshot() []CallerCounts {
	t.mu.Lock()
	by := map[string]*CallerCounts{}
	for k, n := range t.counts {
		c := by[k.caller]
		if c == nil {
			c = &CallerCounts{Caller: k.caller}
			by[k.caller] = c
		}
		switch {
		case k.result == ResultFailed:
			c.Failed += n
		case k.op == OpAcquire && k.result == ResultAdmitted:
			c.Acquired += n
		case k.op == OpAcquire && k.result == ResultLimited:
			c.Limited += n
		case k.op == OpRelease && k.result == ResultReleased:
			c.Released += n
		case k.op == OpPeek:
			c.Peeks += n
		}
	}
	t.mu.Unlock()
	out := make([]CallerCounts, 0, len(by))
	for _, c := range by {
		out = append(out, *c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Caller < out[j].Caller })
	return out
}

// MultiObserver passes every call to each of obs.
type MultiObserver []Observer

// Called implements Observer.
func (m MultiObserver) Called(client string, op Op, key ratelimit.Key, r Result) {
	for _, o := range m {
		if o != nil {
			o.Called(client, op, key, r)
		}
	}
}
