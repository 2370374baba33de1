package ratelimit_test

import (
	"context"
	"testing"
	"time"

	"payserver/internal/ratelimit"
	"payserver/internal/ratelimit/redisstore"
	"payserver/internal/testutil"
)

// quotaLimiter is a Limiter on real Redis with a settable clock (for
// schedules and the near-cache; Redis reads its own time).
func quotaLimiter(t *testing.T, cfg *ratelimit.Config, now *time.Time) *ratelimit.Limiter {
	t.Helper()
	s, err := redisstore.New(testutil.MustRedis(t), redisstore.Options{Prefix: "test:quota:"})
	if err != nil {
		t.Fatal(err)
	}
	l, err := ratelimit.New(s, ratelimit.Options{Timeout: time.Second, Now: func() time.Time { return *now }})
	if err != nil {
		t.Fatal(err)
	}
	l.SetConfig(cfg)
	return l
}

func mustDecide(t *testing.T, l *ratelimit.Limiter, r ratelimit.Request) ratelimit.Decision {
	t.Helper()
	d, err := l.Check(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestChannelWideReserve: "*:CHANNEL" limits every bizType on the channel
// together, and its reservation keeps part of it for REFUND: other bizTypes
// stop at the limit minus the reservation, REFUND may use the rest.
func TestChannelWideReserve(t *testing.T) {
	ch := testutil.UniqueName("UP")
	now := time.Now()
	cfg := &ratelimit.Config{Rules: map[ratelimit.Key]ratelimit.Rule{
		ratelimit.ChannelWide(ch): {
			Windows: []ratelimit.Window{{Limit: 5, Size: time.Minute}},
			Reserve: []map[string]int64{{"REFUND": 2}},
		},
	}}
	l := quotaLimiter(t, cfg, &now)
	pay := ratelimit.Key{BizType: "ONLINE_PAY", Channel: ch}
	refund := ratelimit.Key{BizType: "REFUND", Channel: ch}
	for i, want := range []bool{true, true, true, false} {
		d := mustDecide(t, l, ratelimit.Request{Key: pay, Member: "p" + string(rune('0'+i))})
		if d.Allowed != want {
			t.Fatalf("ONLINE_PAY #%d: allowed %v, want %v (%+v): others get 5-2 = 3", i+1, d.Allowed, want, d)
		}
		if !want && (d.Scope != ratelimit.ChannelWide(ch) || d.Limit != 5 || d.Count != 3 || d.Rule != "count/1m") {
			t.Fatalf("refusal names scope %v, limit %d, used %d, rule %q; want *:%s, the whole limit 5, 3 used, count/1m", d.Scope, d.Limit, d.Count, d.Rule, ch)
		}
	}
	for i, want := range []bool{true, true, false} {
		if d := mustDecide(t, l, ratelimit.Request{Key: refund, Member: "r" + string(rune('0'+i))}); d.Allowed != want {
			t.Fatalf("REFUND #%d: allowed %v, want %v (%+v): REFUND may use all 5", i+1, d.Allowed, want, d)
		}
	}
}

// TestAmountWindowCurrency: an amount cap counts only its currency, and a
// request without an amount passes it uncounted; a decline gives the
// amount back but keeps the call.
func TestAmountWindowCurrency(t *testing.T) {
	k := ratelimit.Key{BizType: "ONLINE_PAY", Channel: testutil.UniqueName("AL")}
	now := time.Now()
	cfg := &ratelimit.Config{Rules: map[ratelimit.Key]ratelimit.Rule{k: {Windows: []ratelimit.Window{
		{Limit: 3, Size: time.Minute},
		{Limit: 1000, Size: time.Minute, Amount: true, Currency: "CNY"},
	}}}}
	l := quotaLimiter(t, cfg, &now)
	if d := mustDecide(t, l, ratelimit.Request{Key: k, Member: "a", Amount: 900, Currency: "CNY"}); !d.Allowed {
		t.Fatalf("a: %+v", d)
	}
	d := mustDecide(t, l, ratelimit.Request{Key: k, Member: "b", Amount: 200, Currency: "CNY"})
	if d.Allowed || !d.Amount || d.Rule != "amount/1m" || d.Count != 900 || d.Limit != 1000 {
		t.Fatalf("b (900+200 > 1000 CNY): got %+v, want refused by amount/1m, used 900 of 1000", d)
	}
	if d := mustDecide(t, l, ratelimit.Request{Key: k, Member: "c", Amount: 5000, Currency: "USD"}); !d.Allowed {
		t.Fatalf("c in USD is not counted by the CNY cap: %+v", d)
	}
	if err := l.ReleaseAmount(context.Background(), ratelimit.HoldOf(k, "a")); err != nil {
		t.Fatal(err)
	}
	if d := mustDecide(t, l, ratelimit.Request{Key: k, Member: "b", Amount: 200, Currency: "CNY"}); !d.Allowed {
		t.Fatalf("b after a's amount came back: %+v", d)
	}
	// a, c and b hold the three calls: a's call was made (declined).
	if d := mustDecide(t, l, ratelimit.Request{Key: k, Member: "d"}); d.Allowed || d.Rule != "count/1m" {
		t.Fatalf("d: got %+v, want refused by count/1m (a's call still counts)", d)
	}
}

// TestScheduleSwitchesOnTheClock: a schedule applies from its start to its
// end on the instance's own clock, with no new document; a refusal
// remembered before the start does not outlive it.
func TestScheduleSwitchesOnTheClock(t *testing.T) {
	k := ratelimit.Key{BizType: "ONLINE_PAY", Channel: testutil.UniqueName("SC")}
	t0 := time.Now()
	from, to := t0.Add(time.Hour), t0.Add(2*time.Hour)
	cfg := &ratelimit.Config{
		Rules: map[ratelimit.Key]ratelimit.Rule{k: {Windows: []ratelimit.Window{{Limit: 1, Size: time.Minute}}}},
		Schedules: []ratelimit.Schedule{
			{Key: k, From: from, To: to, Rule: ratelimit.Rule{Windows: []ratelimit.Window{{Limit: 0, Size: time.Minute}}}},
			{Key: ratelimit.ChannelWide(k.Channel), From: to, To: to.Add(time.Hour), Rule: ratelimit.Rule{Windows: []ratelimit.Window{{Limit: 100, Size: time.Minute}}}},
		},
	}
	now := t0
	l := quotaLimiter(t, cfg, &now)
	mustDecide(t, l, ratelimit.Request{Key: k, Member: "a"})
	if d := mustDecide(t, l, ratelimit.Request{Key: k, Member: "b"}); d.Allowed || d.Source != ratelimit.SourceRedis {
		t.Fatalf("b before the schedule: %+v, want refused by Redis", d)
	}
	now = from.Add(-time.Millisecond)
	if d := mustDecide(t, l, ratelimit.Request{Key: k, Member: "b"}); d.Allowed {
		t.Fatalf("b 1 ms before the schedule: %+v, want refused", d)
	}
	now = from
	if d := mustDecide(t, l, ratelimit.Request{Key: k, Member: "c"}); d.Allowed || !d.Closed() {
		t.Fatalf("c at the schedule's start: %+v, want closed", d)
	}
	now = to
	// Back to the base rule (a still holds its minute in Redis's time),
	// under the channel-wide schedule that starts at the same instant.
	d := mustDecide(t, l, ratelimit.Request{Key: k, Member: "c"})
	if d.Allowed || d.Closed() || d.Limit != 1 || len(d.Windows) != 2 || d.Windows[1].Limit != 100 {
		t.Fatalf("c at the schedule's end: %+v, want refused by the base 1/1m, with the channel-wide 100/1m checked", d)
	}
}

// TestNearCacheEndsAtAScheduleStart: a refusal remembered by the near-cache
// lasts no longer than the rule it was decided under.
func TestNearCacheEndsAtAScheduleStart(t *testing.T) {
	k := ratelimit.Key{BizType: "ONLINE_PAY", Channel: testutil.UniqueName("NC")}
	t0 := time.Now()
	cfg := &ratelimit.Config{
		Rules: map[ratelimit.Key]ratelimit.Rule{k: {Windows: []ratelimit.Window{{Limit: 1, Size: time.Minute}}}},
		Schedules: []ratelimit.Schedule{{Key: k, From: t0.Add(10 * time.Second), To: t0.Add(time.Hour),
			Rule: ratelimit.Rule{Windows: []ratelimit.Window{{Limit: 5, Size: time.Minute}}}}},
	}
	now := t0
	l := quotaLimiter(t, cfg, &now)
	mustDecide(t, l, ratelimit.Request{Key: k, Member: "a"})
	if d := mustDecide(t, l, ratelimit.Request{Key: k, Member: "b"}); d.Allowed || d.RetryAfter > 10*time.Second {
		t.Fatalf("b: %+v, want refused with a retry-after capped at the schedule's start (10s)", d)
	}
	now = t0.Add(10 * time.Second)
	if d := mustDecide(t, l, ratelimit.Request{Key: k, Member: "b"}); !d.Allowed {
		t.Fatalf("b at the schedule's start: %+v, want admitted under 5/1m", d)
	}
}

// TestFallbackStartsFromRedisUse: when Redis fails, an amount or calendar
// window is enforced in process with what Redis last reported used: the
// instance's share of what is left, not a fresh cap. A day's payments are
// never copied in process; their use is.
func TestFallbackStartsFromRedisUse(t *testing.T) {
	clock := testutil.NewClock(time.Unix(1_800_000_000, 0))
	store := &switchStore{LocalStore: ratelimit.NewLocalStore(clock.Now)}
	l, err := ratelimit.New(store, ratelimit.Options{Now: clock.Now, BreakerThreshold: 1})
	if err != nil {
		t.Fatal(err)
	}
	k := ratelimit.Key{BizType: "ONLINE_PAY", Channel: "ALIPAY"}
	l.SetConfig(&ratelimit.Config{Rules: map[ratelimit.Key]ratelimit.Rule{k: {Windows: []ratelimit.Window{
		{Limit: 1000, Amount: true, Currency: "CNY", Calendar: ratelimit.Calendar{Unit: ratelimit.CalendarDay, Zone: time.UTC}},
	}}}})
	pay := func(member string, amount int64) ratelimit.Decision {
		return mustDecide(t, l, ratelimit.Request{Key: k, Member: member, Amount: amount, Currency: "CNY"})
	}
	if d := pay("a", 900); !d.Allowed || d.Source != ratelimit.SourceRedis {
		t.Fatalf("a on Redis: %+v", d)
	}
	store.failing.Store(true)
	if d := pay("b", 200); d.Allowed || d.Source != ratelimit.SourceLocal || d.Limit != 100 {
		t.Fatalf("b (200) in process after Redis reported 900 of 1000 used: %+v, want refused with 100 left", d)
	}
	if d := pay("c", 100); !d.Allowed || d.Source != ratelimit.SourceLocal {
		t.Fatalf("c (100) in process: %+v, want admitted", d)
	}
	if d := pay("d", 1); d.Allowed {
		t.Fatalf("d (1) in process: %+v, want refused: the day's cap is used", d)
	}
	// Back on Redis, which does not hold c: the limit asked is lowered by
	// the in-process use, so d is still refused.
	store.failing.Store(false)
	clock.Advance(time.Second)
	if d := pay("d", 1); d.Allowed {
		t.Fatalf("d back on Redis: %+v, want refused: c's 100 were paid in process", d)
	}
}

// TestNearCacheRefusalNamesTheRuleAndForgets: a refusal answered from the
// near-cache names the same rule and scope as the store's, and is
// remembered for at most a second: room freed by another instance (which
// this one cannot see) is found again, not after the calendar day ends.
func TestNearCacheRefusalNamesTheRuleAndForgets(t *testing.T) {
	ch := testutil.UniqueName("NR")
	k := ratelimit.Key{BizType: "PAY", Channel: ch}
	cfg := &ratelimit.Config{Rules: map[ratelimit.Key]ratelimit.Rule{
		ratelimit.ChannelWide(ch): {Windows: []ratelimit.Window{{Limit: 1, Calendar: ratelimit.Calendar{Unit: ratelimit.CalendarDay, Zone: time.UTC}}}},
	}}
	now := time.Now()
	a := quotaLimiter(t, cfg, &now)
	b := quotaLimiter(t, cfg, &now) // another instance on the same Redis
	mustDecide(t, a, ratelimit.Request{Key: k, Member: "m1"})
	first := mustDecide(t, a, ratelimit.Request{Key: k, Member: "m2"})
	again := mustDecide(t, a, ratelimit.Request{Key: k, Member: "m2"})
	if first.Allowed || again.Allowed || again.Source != ratelimit.SourceNearCache {
		t.Fatalf("m2: %+v then %+v, want refused by Redis then by the near-cache", first, again)
	}
	if again.Rule != "count/day" || again.Scope != ratelimit.ChannelWide(ch) || again.Rule != first.Rule || again.Scope != first.Scope {
		t.Fatalf("near-cache refusal names rule %q scope %v, want %q %v as the store's", again.Rule, again.Scope, first.Rule, first.Scope)
	}
	if err := b.Release(context.Background(), ratelimit.HoldOf(k, "m1")); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Second)
	if d := mustDecide(t, a, ratelimit.Request{Key: k, Member: "m2"}); !d.Allowed {
		t.Fatalf("m2 a second after another instance released m1: %+v, want admitted", d)
	}
}

// TestReleaseForgetsNearCacheRefusalsOfItsChannelOnly: a release frees room
// in its key's windows and its channel's channel-wide windows, so the
// near-cache forgets every refusal on that channel (another bizType's too),
// and keeps the refusals of other channels, which nothing freed.
func TestReleaseForgetsNearCacheRefusalsOfItsChannelOnly(t *testing.T) {
	x, y := testutil.UniqueName("NX"), testutil.UniqueName("NY")
	day := []ratelimit.Window{{Limit: 1, Calendar: ratelimit.Calendar{Unit: ratelimit.CalendarDay, Zone: time.UTC}}}
	cfg := &ratelimit.Config{Rules: map[ratelimit.Key]ratelimit.Rule{
		ratelimit.ChannelWide(x): {Windows: day},
		ratelimit.ChannelWide(y): {Windows: day},
	}}
	now := time.Now()
	l := quotaLimiter(t, cfg, &now)
	payX, refundX, payY := ratelimit.Key{BizType: "PAY", Channel: x}, ratelimit.Key{BizType: "REFUND", Channel: x}, ratelimit.Key{BizType: "PAY", Channel: y}
	mustDecide(t, l, ratelimit.Request{Key: payX, Member: "x1"})
	mustDecide(t, l, ratelimit.Request{Key: payY, Member: "y1"})
	for _, r := range []ratelimit.Request{{Key: refundX, Member: "x2"}, {Key: payY, Member: "y2"}} {
		mustDecide(t, l, r)
		if d := mustDecide(t, l, r); d.Allowed || d.Source != ratelimit.SourceNearCache {
			t.Fatalf("%v %s: %+v, want a near-cache refusal", r.Key, r.Member, d)
		}
	}
	if err := l.Release(context.Background(), ratelimit.HoldOf(payX, "x1")); err != nil {
		t.Fatal(err)
	}
	if d := mustDecide(t, l, ratelimit.Request{Key: refundX, Member: "x2"}); !d.Allowed {
		t.Fatalf("REFUND on %s after PAY's release freed the channel-wide day: %+v, want admitted", x, d)
	}
	if d := mustDecide(t, l, ratelimit.Request{Key: payY, Member: "y2"}); d.Allowed || d.Source != ratelimit.SourceNearCache {
		t.Fatalf("%s after a release on %s: %+v, want still refused from the near-cache", y, x, d)
	}
}
