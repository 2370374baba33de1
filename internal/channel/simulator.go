package channel

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// SimulatorConfig shapes a simulated channel. The zero value answers at once
// and always succeeds.
type SimulatorConfig struct {
	// Latency is how long each call takes, plus up to Jitter more.
	Latency time.Duration `yaml:"latency"`
	Jitter  time.Duration `yaml:"jitter"`
	// DeclineRate, TimeoutRate and ErrorRate are probabilities in [0, 1] of a
	// decline, of no answer (the call hangs until its context ends), and of a
	// channel system error.
	DeclineRate float64 `yaml:"declineRate"`
	TimeoutRate float64 `yaml:"timeoutRate"`
	ErrorRate   float64 `yaml:"errorRate"`
	// RefuseRate is the probability in [0, 1] that the call is refused
	// before anything is sent (a refused connection): it answers
	// ErrNotSent at once and is not counted as a call.
	RefuseRate float64 `yaml:"refuseRate"`
}

// Validate reports a rate outside [0, 1] or a negative duration.
func (c SimulatorConfig) Validate() error {
	for name, r := range map[string]float64{"declineRate": c.DeclineRate, "timeoutRate": c.TimeoutRate, "errorRate": c.ErrorRate, "refuseRate": c.RefuseRate} {
		if r < 0 || r > 1 {
			return fmt.Errorf("%s %v outside [0, 1]", name, r)
		}
	}
	if c.DeclineRate+c.TimeoutRate+c.ErrorRate > 1 {
		return fmt.Errorf("declineRate+timeoutRate+errorRate exceeds 1")
	}
	if c.Latency < 0 || c.Jitter < 0 {
		return fmt.Errorf("negative latency or jitter")
	}
	return nil
}

// Simulator is a stand-in for a real channel (ALIPAY, WECHAT, UNIONPAY, …)
// for development, tests and benchmarks. It never moves money. It counts its
// calls and notices when one requestId is paid twice.
type Simulator struct {
	code string
	cfg  SimulatorConfig

	calls      atomic.Int64
	refused    atomic.Int64
	duplicates atomic.Int64
	mu         sync.Mutex
	seen       map[string]struct{}
	// orders holds the outcome of every order processed, and the orders
	// closed unprocessed (Lookup), by orderNo.
	orders map[string]simOrder
	rnd    *mrand.Rand
	// started is when the simulator started: it remembers nothing of the
	// orders before, and says so rather than answer NOT_FOUND for them.
	started time.Time
}

// simOrder is what the simulator knows of one order.
type simOrder struct {
	result Result
	closed bool // closed before it was processed: never will be
}

var _ Lookup = (*Simulator)(nil)

// NewSimulator returns a simulated channel with the given code.
func NewSimulator(code string, cfg SimulatorConfig) (*Simulator, error) {
	if code == "" {
		return nil, fmt.Errorf("channel: empty simulator code")
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("channel %s simulator: %w", code, err)
	}
	var seed [16]byte
	_, _ = rand.Read(seed[:])
	s1 := uint64(0)
	s2 := uint64(0)
	for i := 0; i < 8; i++ {
		s1 = s1<<8 | uint64(seed[i])
		s2 = s2<<8 | uint64(seed[8+i])
	}
	return &Simulator{code: code, cfg: cfg, seen: map[string]struct{}{}, orders: map[string]simOrder{}, started: time.Now(), rnd: mrand.New(mrand.NewPCG(s1, s2))}, nil
}

// Code implements Channel.
func (s *Simulator) Code() string { return s.code }

// Calls returns how many payments the simulator was asked to make.
func (s *Simulator) Calls() int64 { return s.calls.Load() }

// Duplicates returns how many calls repeated a requestId already paid here.
func (s *Simulator) Duplicates() int64 { return s.duplicates.Load() }

// Refused returns how many calls were refused before sending (RefuseRate).
func (s *Simulator) Refused() int64 { return s.refused.Load() }

// Pay implements Channel.
func (s *Simulator) Pay(ctx context.Context, req Request) (Result, error) {
	s.mu.Lock()
	refuse := s.cfg.RefuseRate > 0 && s.rnd.Float64() < s.cfg.RefuseRate
	s.mu.Unlock()
	if refuse {
		s.refused.Add(1)
		return Result{}, fmt.Errorf("channel %s: connection refused: %w", s.code, ErrNotSent)
	}
	s.calls.Add(1)
	s.mu.Lock()
	if _, dup := s.seen[req.RequestID]; dup {
		s.duplicates.Add(1)
	}
	s.seen[req.RequestID] = struct{}{}
	if known, ok := s.orders[req.OrderNo]; ok && req.OrderNo != "" {
		s.mu.Unlock()
		if known.closed {
			return Result{Status: Declined, DeclineCode: "ORDER_CLOSED", DeclineReason: "the order was closed"}, nil
		}
		return known.result, nil
	}
	roll := s.rnd.Float64()
	jitter := time.Duration(0)
	if s.cfg.Jitter > 0 {
		jitter = time.Duration(s.rnd.Int64N(int64(s.cfg.Jitter)))
	}
	// The outcome is decided, and the payment processed, when the call
	// arrives; a timeout loses only the answer (Query finds it).
	var res Result
	var sysErr error
	lost := roll < s.cfg.TimeoutRate
	switch roll -= s.cfg.TimeoutRate; {
	case lost:
		res = Result{Status: Succeeded, TradeNo: s.tradeNo()}
	case roll < s.cfg.ErrorRate:
		sysErr = &SystemError{Channel: s.code, Code: "SYSTEM_BUSY", Message: "simulated channel system error"}
	case roll-s.cfg.ErrorRate < s.cfg.DeclineRate:
		res = Result{Status: Declined, TradeNo: s.tradeNo(), DeclineCode: "INSUFFICIENT_FUNDS", DeclineReason: "simulated decline"}
	default:
		res = Result{Status: Succeeded, TradeNo: s.tradeNo()}
	}
	if sysErr == nil && req.OrderNo != "" {
		s.orders[req.OrderNo] = simOrder{result: res}
	}
	s.mu.Unlock()

	if lost {
		<-ctx.Done()
		return Result{}, ErrTimeout
	}
	if d := s.cfg.Latency + jitter; d > 0 {
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return Result{}, ErrTimeout
		case <-t.C:
		}
	}
	if sysErr != nil {
		return Result{}, sysErr
	}
	return res, nil
}

// ErrForgotten is a simulator's answer about an order from before it
// started: it keeps its books in memory, so it cannot say.
var ErrForgotten = errors.New("channel: the simulator does not know orders from before it started")

// Query implements Lookup. An order created before the simulator started
// (a restart forgets its books) is ErrForgotten, never NOT_FOUND: it may
// have been processed.
func (s *Simulator) Query(_ context.Context, req Request) (Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	known, ok := s.orders[req.OrderNo]
	switch {
	case !ok && s.forgotten(req):
		return Result{}, ErrForgotten
	case !ok || known.closed:
		return Result{}, ErrNotFound
	}
	return known.result, nil
}

// Close implements Lookup; an order from before the simulator started is
// ErrForgotten.
func (s *Simulator) Close(_ context.Context, req Request) (CloseResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	known, ok := s.orders[req.OrderNo]
	if ok && !known.closed {
		return CloseResult{Processed: true, Result: known.result}, nil
	}
	if !ok && s.forgotten(req) {
		return CloseResult{}, ErrForgotten
	}
	s.orders[req.OrderNo] = simOrder{closed: true}
	return CloseResult{}, nil
}

// forgotten reports whether req's order was created before the simulator
// started (an order without a creation time counts as one).
func (s *Simulator) forgotten(req Request) bool {
	return req.CreatedAt.IsZero() || req.CreatedAt.Before(s.started)
}

func (s *Simulator) tradeNo() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "SIM-" + s.code + "-" + hex.EncodeToString(b[:])
}
