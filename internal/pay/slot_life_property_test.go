package pay

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"pgregory.net/rapid"

	"payserver/internal/limits"
	"payserver/internal/ratelimit"
	"payserver/internal/ratelimit/redisstore"
	"payserver/internal/testutil"
)

// The slot-life property: two instances share one store (Redis), each
// cut off from it now and then (deciding in process under policy local,
// refusing under deny), or losing its answers (the store ran the call, the
// instance never heard). One requestId is attempted several times, from
// either instance, under two bizTypes of a channel with a channel-wide
// key, or on another channel, for two amounts: retries, duplicates,
// in-process admissions, lost answers (a timeout, or the caller giving up
// while the call is out) and their retries. The first
// admitted attempt wins the claim (its order), the others lose it; the
// order ends in a random state. Every admitted attempt's slot, and every
// slot a lost answer may hold (a 503 its ledger keeps), is then settled
// through DecideSlot and its instance's limiter. The oracle is a model of who holds what in the shared store,
// written from the rules alone: a window's record of the member was
// created by the first attempt the shared store admitted there, with that
// attempt's amount; it stays counted exactly when the order is on that
// window's key (or, for the channel-wide window, on its channel) for that
// amount and its state keeps the slot, and its amount stays when that
// state is SUCCEEDED or UNKNOWN.

const slotLifeDoc = `limits:
  P:C1: [{limit: 100, calendar: day}, {amount: 1000000, calendar: day, currency: CNY}]
  Q:C1: [{limit: 100, calendar: day}, {amount: 1000000, calendar: day, currency: CNY}]
  P:C2: [{limit: 100, calendar: day}, {amount: 1000000, calendar: day, currency: CNY}]
  "*:C1": [{limit: 100, calendar: day}]
`

// cutStore is one instance's way to the shared store: while cut, a call
// fails as a refused connection does (provably never run); while lost, a
// check runs on the store and its answer is lost (a timeout), and ran
// keeps whether the first such call was admitted there.
type cutStore struct {
	ratelimit.Store
	cut, lost atomic.Bool
	// giveUp, with lost, holds a lost call's answer until the caller's
	// context ends: the caller gave up (its client disconnected) while
	// the call was out.
	giveUp  atomic.Bool
	ran     atomic.Int32 // 0: no lost call yet; 1: admitted; 2: refused
	reached atomic.Int32 // checks that reached the store
}

var errCut = fmt.Errorf("%w: %w", ratelimit.ErrNotSent, &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")})

func (s *cutStore) Check(ctx context.Context, ws []ratelimit.KeyWindow, m string, amount int64) (ratelimit.StoreResult, error) {
	if s.cut.Load() {
		return ratelimit.StoreResult{}, errCut
	}
	s.reached.Add(1)
	res, err := s.Store.Check(ctx, ws, m, amount)
	if err != nil || !s.lost.Load() {
		return res, err
	}
	if res.Allowed {
		s.ran.CompareAndSwap(0, 1)
	} else {
		s.ran.CompareAndSwap(0, 2)
	}
	if s.giveUp.Load() {
		<-ctx.Done()
		return ratelimit.StoreResult{}, ctx.Err()
	}
	return ratelimit.StoreResult{}, context.DeadlineExceeded
}

func (s *cutStore) Release(ctx context.Context, ws []ratelimit.KeyWindow, m string) (bool, error) {
	if s.cut.Load() {
		return false, errCut
	}
	return s.Store.Release(ctx, ws, m)
}

func (s *cutStore) ReleaseIfAmount(ctx context.Context, ws []ratelimit.KeyWindow, m string, amount int64) (bool, error) {
	if s.cut.Load() {
		return false, errCut
	}
	return s.Store.ReleaseIfAmount(ctx, ws, m, amount)
}

// slotLifeTarget makes, for each history, a fresh shared store.
type slotLifeTarget struct {
	name string
	make func(t *testing.T) func(run string) ratelimit.Store
}

func slotLifeTargets() []slotLifeTarget {
	redisOn := func(t *testing.T, c redis.UniversalClient) func(string) ratelimit.Store {
		return func(run string) ratelimit.Store {
			s, err := redisstore.New(c, redisstore.Options{Prefix: "test:slotlife:" + run + ":"})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
	}
	return []slotLifeTarget{
		{"local", func(t *testing.T) func(string) ratelimit.Store {
			return func(string) ratelimit.Store { return ratelimit.NewLocalStore(nil) }
		}},
		{"embedded", func(t *testing.T) func(string) ratelimit.Store {
			_, c := testutil.MustMiniredis(t)
			return redisOn(t, c)
		}},
		{"redis", func(t *testing.T) func(string) ratelimit.Store { return redisOn(t, testutil.MustRedis(t)) }},
		{"cluster", func(t *testing.T) func(string) ratelimit.Store { return redisOn(t, testutil.MustCluster(t)) }},
		{"durable", func(t *testing.T) func(string) ratelimit.Store {
			// One journal per history, the one before closed when the
			// next opens.
			dir := t.TempDir()
			var open *ratelimit.DurableStore
			t.Cleanup(func() {
				if open != nil {
					_ = open.Close()
				}
			})
			return func(run string) ratelimit.Store {
				if open != nil {
					_ = open.Close()
				}
				s, err := ratelimit.OpenDurableStore(filepath.Join(dir, run+".journal"), nil)
				if err != nil {
					t.Fatal(err)
				}
				open = s
				return s
			}
		}},
	}
}

type slotAttempt struct {
	inst     int
	key      ratelimit.Key
	amount   int64
	admitted bool
	shared   bool // the shared store admitted it (SourceRedis, or a lost answer's call)
	lost     bool // its answer was lost: a 503 whose slot the ledger keeps
	hold     ratelimit.Hold
}

func TestSlotLifeAgreesWithWhoHoldsWhat(t *testing.T) {
	testutil.PropertyChecks(t, 300)
	parsed, err := limits.Parse([]byte(slotLifeDoc))
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range slotLifeTargets() {
		t.Run(target.name, func(t *testing.T) {
			stores := target.make(t)
			var run atomic.Int64
			rapid.Check(t, func(rt *rapid.T) {
				id := fmt.Sprintf("%d-%d", time.Now().UnixNano(), run.Add(1))
				slotLifeHistory(rt, stores(id), parsed.Config, "r"+id)
			})
		})
	}
}

func slotLifeHistory(rt *rapid.T, store ratelimit.Store, cfg *ratelimit.Config, member string) {
	ctx := context.Background()
	clock := testutil.NewClock(time.Now())
	policy := rapid.SampledFrom([]ratelimit.Policy{ratelimit.PolicyLocal, ratelimit.PolicyDeny}).Draw(rt, "policy")
	var ways [2]*cutStore
	var lims [2]*ratelimit.Limiter
	for i := range lims {
		ways[i] = &cutStore{Store: store}
		// A second per store call: a loaded machine must not turn a slow
		// answer into a lost one (another history).
		l, err := ratelimit.New(ways[i], ratelimit.Options{Now: clock.Now, DisableNearCache: true, Policy: policy, Timeout: time.Second})
		if err != nil {
			rt.Fatal(err)
		}
		l.SetConfig(cfg)
		lims[i] = l
	}
	keys := []ratelimit.Key{{BizType: "P", Channel: "C1"}, {BizType: "Q", Channel: "C1"}, {BizType: "P", Channel: "C2"}}
	var attempts []*slotAttempt
	n := rapid.IntRange(2, 6).Draw(rt, "attempts")
	for i := 0; i < n; i++ {
		a := &slotAttempt{
			inst:   rapid.IntRange(0, 1).Draw(rt, "instance"),
			key:    rapid.SampledFrom(keys).Draw(rt, "key"),
			amount: rapid.SampledFrom([]int64{100, 200}).Draw(rt, "amount"),
		}
		way := ways[a.inst]
		if cut := rapid.Bool().Draw(rt, "cut"); cut != way.cut.Load() {
			way.cut.Store(cut)
			clock.Advance(time.Minute) // past the breaker's cool-down either way
		}
		lost := !way.cut.Load() && rapid.IntRange(0, 3).Draw(rt, "lost") == 0
		gaveUp := lost && rapid.Bool().Draw(rt, "caller gave up")
		way.lost.Store(lost)
		way.giveUp.Store(gaveUp)
		way.ran.Store(0)
		way.reached.Store(0)
		actx, cancel := ctx, context.CancelFunc(func() {})
		if gaveUp {
			actx, cancel = context.WithTimeout(ctx, 5*time.Millisecond)
		}
		d, err := lims[a.inst].Check(actx, ratelimit.Request{Key: a.key, Member: member, Amount: a.amount, Currency: "CNY"})
		cancel()
		way.lost.Store(false)
		way.giveUp.Store(false)
		lost = lost && way.reached.Load() > 0 // an open breaker asks no store
		switch {
		case err != nil && way.reached.Load() == 0 && policy == ratelimit.PolicyDeny && errors.Is(err, ratelimit.ErrUnavailable):
			// Refused without the store (cut off, or its breaker open
			// after failures): it took nothing.
		case err != nil && gaveUp && way.reached.Load() == 0 && errors.Is(err, context.DeadlineExceeded):
			// The caller gave up before its call was sent (a loaded
			// machine): nothing sent, nothing taken.
		case err != nil:
			rt.Fatalf("check (cut %v, lost %v, policy %s): %v", way.cut.Load(), lost, policy, err)
		case lost && (d.Allowed || !d.Unknown):
			rt.Fatalf("a check whose answers were lost: %+v, want a refusal with an unknown outcome", d)
		}
		a.admitted, a.shared, a.hold = d.Allowed, d.Allowed && d.Source == ratelimit.SourceRedis, d.Hold
		if lost {
			a.lost, a.shared = true, way.ran.Load() == 1
		}
		attempts = append(attempts, a)
	}
	// The first admitted attempt wins the claim.
	var winner *Order
	var winnerAt = -1
	for i, a := range attempts {
		if a.admitted {
			winner = &Order{OrderNo: fmt.Sprintf("O%d", i), RequestID: member, BizType: a.key.BizType, Channel: a.key.Channel, Amount: a.amount, Currency: "CNY"}
			winnerAt = i
			break
		}
	}
	if winner == nil {
		return
	}
	switch rapid.IntRange(0, 3).Draw(rt, "state") {
	case 0:
		winner.Status = StatusSucceeded
	case 1:
		winner.Status = StatusUnknown
	case 2:
		winner.Status, winner.FailureCode = StatusFailed, "DECLINED"
	default:
		winner.Status, winner.FailureCode = StatusFailed, FailureNotSent
	}
	for i := range ways {
		ways[i].cut.Store(false)
	}
	clock.Advance(time.Minute)
	for i, a := range attempts {
		if !a.admitted && !a.lost {
			continue
		}
		mine := &Order{OrderNo: fmt.Sprintf("O%d", i), RequestID: member, BizType: a.key.BizType, Channel: a.key.Channel, Amount: a.amount, Currency: "CNY"}
		if i == winnerAt {
			mine = nil
		}
		d := DecideSlot(slotOf(a.hold, mine, winner), winner)
		if d.Fate == FateWait {
			rt.Fatalf("attempt %d waits on a final order", i)
		}
		h := where(a.hold, slotOf(a.hold, mine, winner), d.Where)
		var err error
		switch d.Fate {
		case FateRelease:
			err = lims[a.inst].Release(ctx, h)
		case FateGiveBackAmount:
			err = lims[a.inst].ReleaseAmount(ctx, h)
		}
		if err != nil {
			rt.Fatalf("settling attempt %d (%s %s): %v", i, d.Fate, d.Where, err)
		}
	}
	// The oracle: who holds what in the shared store.
	state := StateOf(winner)
	keeps := state == StateSucceeded || state == StateUnknown || state == StateFailed
	keepsAmount := state == StateSucceeded || state == StateUnknown
	first := func(match func(*slotAttempt) bool) (int64, bool) {
		for _, a := range attempts {
			if a.shared && match(a) {
				return a.amount, true
			}
		}
		return 0, false
	}
	var log []string
	for i, a := range attempts {
		log = append(log, fmt.Sprintf("%d: instance %d %s %d admitted %v shared %v lost %v inProcess %v", i, a.inst, a.key, a.amount, a.admitted, a.shared, a.lost, a.hold.InProcess()))
	}
	wantCount := map[ratelimit.Key]int64{}
	wantAmount := map[ratelimit.Key]int64{}
	for _, k := range keys {
		x, ok := first(func(a *slotAttempt) bool { return a.key == k })
		if ok && keeps && winner.BizType == k.BizType && winner.Channel == k.Channel && winner.Amount == x {
			wantCount[k] = 1
			if keepsAmount {
				wantAmount[k] = x
			}
		}
	}
	wide := ratelimit.ChannelWide("C1")
	if x, ok := first(func(a *slotAttempt) bool { return a.key.Channel == "C1" }); ok && keeps && winner.Channel == "C1" && winner.Amount == x {
		wantCount[wide] = 1
	}
	// Each instance's in-process windows of the payment keys: a record
	// there was made by the first attempt that instance decided in
	// process on that key, unless the instance had seen the shared store
	// admit the member there (it keeps that identity, weighing nothing:
	// the later attempt is its duplicate); calendar windows copy no
	// shared admission. The record stays by the same rule as the shared
	// one.
	for inst, l := range lims {
		for _, k := range keys {
			var want, wantAmt int64
			for _, a := range attempts {
				if a.inst != inst || !a.admitted || a.key != k {
					continue
				}
				if a.shared {
					break // identities only from here
				}
				{
					if keeps && winner.BizType == k.BizType && winner.Channel == k.Channel && winner.Amount == a.amount {
						want = 1
						if keepsAmount {
							wantAmt = a.amount
						}
					}
					break
				}
			}
			if use := l.InProcessUsage(k); use[0] != want || use[1] != wantAmt {
				rt.Fatalf("instance %d's in-process %s holds %v, want count %d amount %d\nwinner %s on %s:%s for %d, %s\n%v",
					inst, k, use, want, wantAmt, winner.OrderNo, winner.BizType, winner.Channel, winner.Amount, state, log)
			}
		}
	}
	for _, k := range append(keys, wide) {
		ws := ratelimit.KeyWindows(k, cfg.Rules[k].Windows)
		use, err := store.Usage(ctx, ws)
		if err != nil {
			rt.Fatal(err)
		}
		if use[0] != wantCount[k] || len(use) > 1 && use[1] != wantAmount[k] {
			rt.Fatalf("shared %s holds %v, want count %d amount %d\nwinner %s on %s:%s for %d, %s\n%v",
				k, use, wantCount[k], wantAmount[k], winner.OrderNo, winner.BizType, winner.Channel, winner.Amount, state, log)
		}
	}
}
