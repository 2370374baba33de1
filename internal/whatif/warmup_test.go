package whatif

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"payserver/internal/decisionlog"
	"payserver/internal/limits"
	"payserver/internal/ratelimit"
)

// logSource is a decision log held in memory, in order.
type logSource []decisionlog.Entry

func (l logSource) Stream(_ context.Context, f decisionlog.Filter, fn func(decisionlog.Entry) error) error {
	for _, e := range l {
		if !e.At.Before(f.From) && e.At.Before(f.To) {
			if err := fn(e); err != nil {
				return err
			}
		}
	}
	return nil
}

// TestWarmUpSeesEveryThrottleInForce: a store (the model, fed the whole
// log) takes steady traffic under its limit and one throttle at a random
// time before From, with a random retry-after up to MaxThrottleWait; the
// learned limit refuses what comes after. A replay from From under the
// same document reproduces every decision: its warm-up reaches back to any
// throttle still in force at From (its retry-after included) and to the
// use the throttle learned from.
func TestWarmUpSeesEveryThrottleInForce(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	for _, doc := range []string{
		"limits:\n  PAY:ALIPAY: {limit: 100, window: 1m}\n", // 1 a second: 60 of 100 in a window
		"limits:\n  PAY:ALIPAY: {limit: 20, window: 1s}\n",  // 10 a second: 10 of 20
	} {
		parsed, err := limits.Parse([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		cfg := parsed.Config
		key := ratelimit.Key{BizType: "PAY", Channel: "ALIPAY"}
		every := time.Second
		if cfg.RuleAt(key, time.Time{}).Longest() == time.Second {
			every = 100 * time.Millisecond
		}
		from := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		warm := WarmUp(cfg, nil)
		for c := range 12 {
			t.Run(fmt.Sprintf("%s/%d", cfg.RuleAt(key, from).Windows[0].Size, c), func(t *testing.T) {
				throttleAt := from.Add(-time.Duration(r.Int64N(int64(ratelimit.MaxThrottleWait))))
				retryAfter := time.Duration(r.Int64N(int64(ratelimit.MaxThrottleWait)))
				store := ratelimit.NewModel()
				var log logSource
				throttled := false
				for at, n := from.Add(-warm-time.Minute), 0; at.Before(from.Add(5 * time.Minute)); at, n = at.Add(every), n+1 {
					if !throttled && !at.Before(throttleAt) {
						store.ThrottleKey(cfg, key, "t", throttleAt, retryAfter)
						log = append(log, decisionlog.Entry{At: throttleAt, Kind: decisionlog.KindThrottle, Key: key, Member: "t",
							Amount: retryAfter.Microseconds(), Version: "v1"})
						throttled = true
					}
					member := fmt.Sprintf("r%d", n)
					_, res := store.Decide(cfg, ratelimit.Request{Key: key, Member: member}, at)
					out := decisionlog.Refused
					if res.Allowed {
						out = decisionlog.Admitted
					}
					log = append(log, decisionlog.Entry{At: at, Kind: decisionlog.KindDecision, Key: key, Member: member, Outcome: out,
						Source: ratelimit.SourceRedis, Version: "v1"})
				}
				res, err := Replay(context.Background(), log, Options{From: from, To: from.Add(5 * time.Minute), Proposed: cfg,
					InForce: map[string]*ratelimit.Config{"v1": cfg}})
				if err != nil {
					t.Fatal(err)
				}
				if res.Fidelity != 1 || len(res.Keys) != 1 || res.Keys[0].NewlyRefused != 0 || res.Keys[0].NewlyAdmitted != 0 {
					t.Fatalf("throttle %v before from, retry-after %v: fidelity %v, %+v", from.Sub(throttleAt), retryAfter, res.Fidelity, res.Keys)
				}
			})
		}
	}
}
