package pay_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"pgregory.net/rapid"

	"payserver/internal/apperr"
	"payserver/internal/channel"
	"payserver/internal/limits"
	"payserver/internal/pay"
	"payserver/internal/pay/paytest"
	"payserver/internal/ratelimit"
	"payserver/internal/ratelimit/redisstore"
	"payserver/internal/testutil"
)

// TestRoutingAgreesWithModel extends the model-based property tests with
// routing decisions: random routes, limits (channel-wide ones too),
// refusing channels, breaker thresholds and sequences of unpinned, pinned
// and retried payments run through the payment service over the real
// limiter on real Redis, and
// each answer, and every window's occupancy after it, must equal an oracle
// built on ratelimit.Model:
//
//   - an unpinned payment goes to the first candidate that is not unhealthy
//     and whose model window admits it; the ones before are skipped as
//     unhealthy, closed (limit 0) or limited;
//   - a candidate whose call is refused before sending is released in the
//     model and the payment goes on with the next candidates; when none is
//     left it ends FAILED NOT_SENT;
//   - a breaker opens after its threshold of failed calls in a row (routed
//     calls, and pinned ones while it is closed) and stays open (the
//     cool-down outlasts the test);
//   - a pinned payment takes a slot on its own channel only, is sent even
//     while its channel is unhealthy, and a retry takes nothing;
//   - every candidate refusing is a 429 listing each with its reason.
//
// Windows are one hour long, so nothing leaves them during a sequence and
// the model's clock can stand still. PAYSERVER_PROPERTY_CHECKS sets the
// number of sequences (default 200; -rapid.checks overrides).
func TestRoutingAgreesWithModel(t *testing.T) {
	testutil.PropertyChecks(t, 200)
	client := testutil.MustRedis(t)
	codes := []string{"A", "B", "C", "D"}
	rapid.Check(t, func(rt *rapid.T) {
		biz := testutil.UniqueName("RP")
		// A prefix per sequence: channel-wide keys are shared by bizTypes.
		store, err := redisstore.New(client, redisstore.Options{Prefix: "rtprop" + biz + ":"})
		if err != nil {
			rt.Fatal(err)
		}
		lim, err := ratelimit.New(store, ratelimit.Options{DisableNearCache: true, Timeout: time.Second})
		if err != nil {
			rt.Fatal(err)
		}
		refuses := map[string]bool{}
		doc := "window: 1h\nlimits:\n"
		var chs []channel.Channel
		for _, c := range codes {
			limit := rapid.Int64Range(-1, 3).Draw(rt, "limit"+c)
			refuses[c] = rapid.Float64Range(0, 1).Draw(rt, "refuse"+c) < 0.25
			doc += fmt.Sprintf("  %s:%s: %d\n", biz, c, limit)
			if wide := rapid.Int64Range(-1, 3).Draw(rt, "wide"+c); wide >= 0 {
				doc += fmt.Sprintf("  \"*:%s\": %d\n", c, wide) // the channel-wide key
			}
			cfg := channel.SimulatorConfig{}
			if refuses[c] {
				cfg.RefuseRate = 1
			}
			sim, _ := channel.NewSimulator(c, cfg)
			chs = append(chs, sim)
		}
		cands := rapid.SliceOfNDistinct(rapid.SampledFrom(codes), 1, 4, rapid.ID[string]).Draw(rt, "route")
		doc += "routes:\n  " + biz + ": ["
		for i, c := range cands {
			if i > 0 {
				doc += ", "
			}
			doc += c
		}
		doc += "]\n"
		parsed, err := limits.Parse([]byte(doc))
		if err != nil {
			rt.Fatal(err)
		}
		routesOf.Store(lim, parsed)
		lim.SetConfig(parsed.Config)
		failures := rapid.IntRange(1, 3).Draw(rt, "breakerFailures")
		reg, _ := channel.NewRegistry(chs...)
		svc, err := pay.NewService(paytest.NewMemStore(), lim, reg, pay.Options{
			Routes: staticRoutes{lim}, Health: channel.NewHealth(codes, channel.HealthOptions{Failures: failures, Cooldown: time.Hour}),
		})
		if err != nil {
			rt.Fatal(err)
		}

		o := newRouteOracle(biz, parsed.Config, refuses, failures)
		var ids []string
		ctx := context.Background()
		for step := range rapid.IntRange(1, 12).Draw(rt, "steps") {
			req := pay.PayRequest{BizType: biz, MerchantID: "M", Amount: 1, Currency: "CNY"}
			var want routeAnswer
			switch op := rapid.IntRange(0, 9).Draw(rt, "op"); {
			case op < 6 || len(ids) == 0: // a new unpinned payment
				req.RequestID = fmt.Sprintf("u%d", step)
				want = o.routed(req.RequestID, cands)
			case op < 8: // a new payment pinned to a random channel
				req.RequestID = fmt.Sprintf("p%d", step)
				req.Channel = rapid.SampledFrom(codes).Draw(rt, "pin")
				want = o.pinned(req.RequestID, req.Channel)
			default: // a retry of an earlier payment, as it was sent
				id := rapid.SampledFrom(ids).Draw(rt, "retry")
				req, want = o.sent[id], o.answers[id]
			}
			got := answerOf(svc.Pay(ctx, req))
			if !reflect.DeepEqual(got, want) {
				rt.Fatalf("step %d %+v: got %+v, want %+v", step, req, got, want)
			}
			if _, seen := o.sent[req.RequestID]; !seen && want.Code == "" {
				// Only a stored order is replayed; a refused payment has none.
				o.sent[req.RequestID], o.answers[req.RequestID] = req, want
				ids = append(ids, req.RequestID)
			}
			for _, c := range codes {
				for _, key := range []ratelimit.Key{{BizType: biz, Channel: c}, ratelimit.ChannelWide(c)} {
					_, counts, err := lim.Usage(ctx, key)
					if err != nil {
						rt.Fatal(err)
					}
					if w := o.usage(key); !reflect.DeepEqual(counts, w) {
						rt.Fatalf("step %d: %s holds %v, model %v", step, key, counts, w)
					}
				}
			}
		}
	})
}

// routeAnswer is what a payment answered, as the oracle predicts it.
type routeAnswer struct {
	Code       apperr.Code // "" for an order
	Channel    string
	Status     pay.Status
	RoutedFrom []pay.RouteSkip
	// Refused lists a 429's candidates as channel/reason.
	Refused []pay.RouteSkip
}

func answerOf(o *pay.Order, err error) routeAnswer {
	if err != nil {
		var e *apperr.Error
		if !errors.As(err, &e) {
			return routeAnswer{Code: apperr.Internal}
		}
		a := routeAnswer{Code: e.Code}
		cands, _ := e.Details["candidates"].([]map[string]any)
		for _, c := range cands {
			a.Refused = append(a.Refused, pay.RouteSkip{Channel: c["channel"].(string), Reason: c["reason"].(string)})
		}
		return a
	}
	a := routeAnswer{Channel: o.Channel, Status: o.Status, RoutedFrom: o.RoutedFrom}
	if o.Status == pay.StatusFailed {
		a.RoutedFrom = nil // a NOT_SENT order keeps its claim's list
	}
	return a
}

// routeOracle predicts routing from ratelimit.Model: Model.Decide gives the
// windows that apply to a payment (its key's and its channel-wide key's)
// and whether it is admitted.
type routeOracle struct {
	biz      string
	cfg      *ratelimit.Config
	model    *ratelimit.Model
	now      time.Time
	refuses  map[string]bool
	failures int
	failed   map[string]int // failed calls in a row, per channel
	open     map[string]bool
	sent     map[string]pay.PayRequest
	answers  map[string]routeAnswer
}

func newRouteOracle(biz string, cfg *ratelimit.Config, refuses map[string]bool, failures int) *routeOracle {
	return &routeOracle{biz: biz, cfg: cfg, model: ratelimit.NewModel(), now: time.Now(), refuses: refuses,
		failures: failures, failed: map[string]int{}, open: map[string]bool{},
		sent: map[string]pay.PayRequest{}, answers: map[string]routeAnswer{}}
}

// check decides id's payment on channel c in the model; it returns the
// windows it was decided on, to release them.
func (o *routeOracle) check(id, c string) ([]ratelimit.KeyWindow, ratelimit.StoreResult) {
	return o.model.Decide(o.cfg, ratelimit.Request{Key: ratelimit.Key{BizType: o.biz, Channel: c}, Member: id, Amount: 1, Currency: "CNY"}, o.now)
}

// closed reports whether a count window of c's key or its channel-wide key
// has limit 0, read from the document's windows here rather than through
// Rule.IsClosed, which the flow uses.
func (o *routeOracle) closed(c string) bool {
	for _, k := range []ratelimit.Key{{BizType: o.biz, Channel: c}, ratelimit.ChannelWide(c)} {
		for _, w := range o.cfg.RuleAt(k, time.Now()).Windows {
			if w.Limit == 0 && !w.Amount {
				return true
			}
		}
	}
	return false
}

// usage is the model's occupancy of key's windows, as Limiter.Usage reads
// them (nil for an unlimited key).
func (o *routeOracle) usage(key ratelimit.Key) []int64 {
	rule := o.cfg.RuleAt(key, time.Now())
	if rule.IsUnlimited() {
		return nil
	}
	ws := make([]ratelimit.KeyWindow, len(rule.Windows))
	for i, w := range rule.Windows {
		ws[i] = ratelimit.KeyWindow{Key: key, Window: w}
	}
	return o.model.Usage(ws, o.now)
}

// routed predicts an unpinned payment.
func (o *routeOracle) routed(id string, cands []string) routeAnswer {
	skipped := []pay.RouteSkip{}
	lastTried := "" // the last candidate admitted whose call was refused
	for _, c := range cands {
		if o.open[c] {
			skipped = append(skipped, pay.RouteSkip{Channel: c, Reason: pay.ReasonUnhealthy})
			continue
		}
		ws, res := o.check(id, c)
		if !res.Allowed {
			reason := pay.ReasonLimited
			if o.closed(c) {
				reason = pay.ReasonClosed
			}
			skipped = append(skipped, pay.RouteSkip{Channel: c, Reason: reason})
			continue
		}
		if o.refuses[c] {
			o.failed[c]++
			if o.failed[c] >= o.failures {
				o.open[c] = true
			}
			o.model.Release(ws, id)
			skipped = append(skipped, pay.RouteSkip{Channel: c, Reason: pay.ReasonUnhealthy})
			lastTried = c
			continue
		}
		o.failed[c] = 0
		return routeAnswer{Channel: c, Status: pay.StatusSucceeded, RoutedFrom: skipped}
	}
	if lastTried != "" {
		// The claim was made and moved on; it ends NOT_SENT where it was.
		return routeAnswer{Channel: lastTried, Status: pay.StatusFailed}
	}
	return routeAnswer{Code: apperr.RequestLimited, Refused: skipped}
}

// pinned predicts a payment pinned to c: never refused by the breaker,
// never rerouted; its call counts into c's breaker while that is closed.
func (o *routeOracle) pinned(id, c string) routeAnswer {
	ws, res := o.check(id, c)
	if !res.Allowed {
		return routeAnswer{Code: apperr.RequestLimited}
	}
	if o.refuses[c] {
		if !o.open[c] {
			o.failed[c]++
			o.open[c] = o.failed[c] >= o.failures
		}
		o.model.Release(ws, id)
		return routeAnswer{Channel: c, Status: pay.StatusFailed}
	}
	if !o.open[c] {
		o.failed[c] = 0
	}
	return routeAnswer{Channel: c, Status: pay.StatusSucceeded}
}
