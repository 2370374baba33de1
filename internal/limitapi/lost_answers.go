package limitapi

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"payserver/internal/apperr"
	"payserver/internal/ratelimit"
)

// LostAnswerGrace is how long the member of an acquire whose limiter
// answer was lost waits for its client's retry with the same requestId
// before it is released: the lost call may have recorded it, and a client
// answered 503 that never retries would leave the slot held until its
// window passes (midnight, for a calendar day).
const LostAnswerGrace = 60 * time.Second

// MaxLostAnswers bounds the members waiting for their grace. Past it a
// lost answer is not remembered (counted in LostAnswersDropped): its slot,
// if the lost call took one, frees itself when its window passes.
const MaxLostAnswers = 10_000

// lostAnswers is the bounded set of members a lost call may have recorded,
// each with the time its answer was lost.
type lostAnswers struct {
	mu      sync.Mutex
	byHold  map[lostKey]lostAnswer
	dropped int64
}

type lostKey struct {
	key    ratelimit.Key
	member string
}

type lostAnswer struct {
	client string
	hold   ratelimit.Hold
	at     time.Time
}

// LostAnswer is Decide's answer to a check whose limiter answer was lost
// (d.Unknown): the decision, and a DEPENDENCY_UNAVAILABLE error with
// details.dependency "limiter" and details.outcome "unknown", never a
// refusal: the member may hold a slot after all. A retry with the same
// requestId is admitted as the same slot, or refused.
func LostAnswer(r AcquireRequest, d ratelimit.Decision) (Acquired, error) {
	e := apperr.New(apperr.DependencyUnavailable,
		"the limiter's answer was lost; the slot may be held: retry with the same requestId, which is never counted twice").
		WithDetails(map[string]any{"dependency": "limiter", "outcome": "unknown"})
	e.RetryAfter = max(d.RetryAfter, time.Second)
	return Acquired{Decision: d, Windows: []WindowUsage{}}, e
}

// ReleaseLater remembers h, the member of client's acquire whose limiter
// answer was lost, to be released once LostAnswerGrace has passed unless
// the same requestId is admitted (or released) again meanwhile. It never
// blocks; SweepLostAnswers does the releasing.
func (s *Service) ReleaseLater(client string, h ratelimit.Hold) {
	l := &s.lost
	l.mu.Lock()
	defer l.mu.Unlock()
	k := lostKey{h.Key, h.Member}
	if _, ok := l.byHold[k]; !ok && len(l.byHold) >= MaxLostAnswers {
		l.dropped++
		return
	}
	if l.byHold == nil {
		l.byHold = map[lostKey]lostAnswer{}
	}
	l.byHold[k] = lostAnswer{client: client, hold: h, at: s.opts.Now()}
}

// forget drops member's lost answer on key: a later admission or release
// of its requestId settled it.
func (s *Service) forget(key ratelimit.Key, member string) {
	s.lost.mu.Lock()
	delete(s.lost.byHold, lostKey{key, member})
	s.lost.mu.Unlock()
}

// LostAnswersDropped is how many lost answers a full set did not keep.
func (s *Service) LostAnswersDropped() int64 {
	s.lost.mu.Lock()
	defer s.lost.mu.Unlock()
	return s.lost.dropped
}

// LostAnswersWaiting is how many lost answers wait for their grace.
func (s *Service) LostAnswersWaiting() int {
	s.lost.mu.Lock()
	defer s.lost.mu.Unlock()
	return len(s.lost.byHold)
}

// SweepLostAnswers releases every remembered member whose grace has passed
// on the service's clock. One the limiter cannot release now is kept for
// the next sweep.
func (s *Service) SweepLostAnswers(ctx context.Context) {
	now := s.opts.Now()
	s.lost.mu.Lock()
	var due []lostAnswer
	for k, a := range s.lost.byHold {
		if !now.Before(a.at.Add(LostAnswerGrace)) {
			due = append(due, a)
			delete(s.lost.byHold, k)
		}
	}
	s.lost.mu.Unlock()
	for _, a := range due {
		if err := s.opts.Admit.Release(ctx, a.hold); err != nil {
			s.opts.Logger.Warn("could not release the slot of a lost limiter answer yet; retrying at the next sweep",
				"client", a.client, "key", a.hold.Key.String(), "err", err)
			s.lost.mu.Lock()
			if _, again := s.lost.byHold[lostKey{a.hold.Key, a.hold.Member}]; !again {
				s.lost.byHold[lostKey{a.hold.Key, a.hold.Member}] = a
			}
			s.lost.mu.Unlock()
			continue
		}
		s.observe(a.client, OpRelease, a.hold.Key, ResultReleased)
		s.opts.Logger.Info("released the slot of an acquire whose limiter answer was lost and that was not retried",
			"client", a.client, "key", a.hold.Key.String())
	}
}

// RunLostAnswers sweeps the lost answers every interval until ctx ends.
// Main owns it.
func (s *Service) RunLostAnswers(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.SweepLostAnswers(ctx)
		}
	}
}

// discardLogger is the default Options.Logger.
func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
