package ratelimit

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"payserver/internal/testutil"
)

// The property tests run random sequences of operations on the Model and on
// every store, and require the same answers: admissions, binding windows,
// counts of every window, duplicates and retry-after (exactly: all stores
// work in whole microseconds, the precision of Redis TIME).
//
// Sequences run PAYSERVER_PROPERTY_CHECKS times per store (default 1000;
// `-rapid.checks=N` overrides). A failure prints the minimal sequence and a
// seed; replay it with `go test -run 'TestStoresAgreeWithModel/redis'
// -rapid.seed=SEED ./internal/ratelimit/` (rapid also saves it under
// testdata/rapid for -rapid.failfile).

// modelTarget is one store driven with explicit time.
type modelTarget interface {
	// checkBatch decides members in order at now, in one store call where
	// the store has batches.
	checkBatch(t *rapid.T, ws []KeyWindow, members []checkMember, now time.Time) []StoreResult
	// release reports whether some window held member; with an amount,
	// it releases the member's records for that amount only
	// (ReleaseIfAmount).
	release(t *rapid.T, ws []KeyWindow, member string, amount *int64) bool
	usage(t *rapid.T, ws []KeyWindow, now time.Time) []int64
	// throttle records a throttle at now (Learner.Throttle); learned reads
	// the learned limits at now (Learner.Learned).
	throttle(t *rapid.T, ws []KeyWindow, now time.Time, retryAfter time.Duration)
	learned(t *rapid.T, ws []KeyWindow, now time.Time) []LearnedLimit
}

// releaseFrom is s.Release, or s.ReleaseIfAmount with an amount.
func releaseFrom(s Store, ws []KeyWindow, member string, amount *int64) (bool, error) {
	if amount != nil {
		return s.ReleaseIfAmount(context.Background(), ws, member, *amount)
	}
	return s.Release(context.Background(), ws, member)
}

// checkMember is one member of a check and what it pays.
type checkMember struct {
	id     string
	amount int64
}

// redisTarget runs the Redis store with the time passed in (its scripts
// take it as an argument), the only difference from production, where
// Redis reads TIME.
type redisTarget struct {
	s   RedisTestStore
	now *time.Time
}

func (r redisTarget) checkBatch(t *rapid.T, ws []KeyWindow, members []checkMember, now time.Time) []StoreResult {
	checks := make([]BatchCheck, len(members))
	for i, m := range members {
		checks[i] = BatchCheck{Windows: ws, Member: m.id, Amount: m.amount}
	}
	return r.checkMerchants(t, checks, now)
}

func (r redisTarget) release(t *rapid.T, ws []KeyWindow, member string, amount *int64) bool {
	found, err := releaseFrom(r.s, ws, member, amount)
	if err != nil {
		t.Fatalf("release: %v", err)
	}
	return found
}

func (r redisTarget) usage(t *rapid.T, ws []KeyWindow, now time.Time) []int64 {
	*r.now = now
	got, err := r.s.Usage(context.Background(), ws)
	if err != nil {
		t.Fatalf("usage: %v", err)
	}
	return got
}

func (r redisTarget) throttle(t *rapid.T, ws []KeyWindow, now time.Time, retryAfter time.Duration) {
	*r.now = now
	if err := r.s.Throttle(context.Background(), ws, retryAfter); err != nil {
		t.Fatalf("throttle: %v", err)
	}
}

func (r redisTarget) learned(t *rapid.T, ws []KeyWindow, now time.Time) []LearnedLimit {
	*r.now = now
	got, err := r.s.Learned(context.Background(), ws)
	if err != nil {
		t.Fatalf("learned: %v", err)
	}
	return got
}

// localTarget runs the in-process store with a settable clock.
type localTarget struct {
	s   *LocalStore
	now *time.Time
}

func (l localTarget) checkBatch(t *rapid.T, ws []KeyWindow, members []checkMember, now time.Time) []StoreResult {
	*l.now = now
	out := make([]StoreResult, len(members))
	for i, m := range members {
		res, err := l.s.Check(context.Background(), ws, m.id, m.amount)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = res
	}
	return out
}

func (l localTarget) release(t *rapid.T, ws []KeyWindow, member string, amount *int64) bool {
	found, err := releaseFrom(l.s, ws, member, amount)
	if err != nil {
		t.Fatal(err)
	}
	return found
}

func (l localTarget) usage(t *rapid.T, ws []KeyWindow, now time.Time) []int64 {
	*l.now = now
	got, err := l.s.Usage(context.Background(), ws)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func (l localTarget) throttle(t *rapid.T, ws []KeyWindow, now time.Time, retryAfter time.Duration) {
	*l.now = now
	if err := l.s.Throttle(context.Background(), ws, retryAfter); err != nil {
		t.Fatal(err)
	}
}

func (l localTarget) learned(t *rapid.T, ws []KeyWindow, now time.Time) []LearnedLimit {
	*l.now = now
	got, err := l.s.Learned(context.Background(), ws)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// durableTarget runs the journaled store with a settable clock, and now
// and then reopens it from its journal (a restart) before a check.
type durableTarget struct {
	s    *DurableStore
	path string
	now  *time.Time
}

// maybeRestart now and then reopens the store from its journal.
func (d *durableTarget) maybeRestart(t *rapid.T) {
	if rapid.IntRange(0, 4).Draw(t, "restart") == 0 {
		if err := d.s.Close(); err != nil {
			t.Fatal(err)
		}
		s, err := OpenDurableStore(d.path, func() time.Time { return *d.now })
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		d.s = s
	}
}

func (d *durableTarget) throttle(t *rapid.T, ws []KeyWindow, now time.Time, retryAfter time.Duration) {
	*d.now = now
	d.maybeRestart(t)
	if err := d.s.Throttle(context.Background(), ws, retryAfter); err != nil {
		t.Fatal(err)
	}
}

func (d *durableTarget) learned(t *rapid.T, ws []KeyWindow, now time.Time) []LearnedLimit {
	*d.now = now
	d.maybeRestart(t)
	got, err := d.s.Learned(context.Background(), ws)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func (d *durableTarget) checkBatch(t *rapid.T, ws []KeyWindow, members []checkMember, now time.Time) []StoreResult {
	*d.now = now
	d.maybeRestart(t)
	out := make([]StoreResult, len(members))
	for i, m := range members {
		res, err := d.s.Check(context.Background(), ws, m.id, m.amount)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = res
	}
	return out
}

func (d *durableTarget) release(t *rapid.T, ws []KeyWindow, member string, amount *int64) bool {
	found, err := releaseFrom(d.s, ws, member, amount)
	if err != nil {
		t.Fatal(err)
	}
	return found
}

func (d *durableTarget) usage(t *rapid.T, ws []KeyWindow, now time.Time) []int64 {
	*d.now = now
	got, err := d.s.Usage(context.Background(), ws)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

type namedTarget struct {
	name string
	make func(t *testing.T) modelTarget
}

func modelTargets() []namedTarget {
	var out []namedTarget
	for _, srv := range theRedisServers() {
		out = append(out, namedTarget{srv.Name, func(t *testing.T) modelTarget {
			now := new(time.Time)
			return redisTarget{srv.New(t, "test:model:", now), now}
		}})
	}
	return append(out, []namedTarget{
		{"local", func(t *testing.T) modelTarget {
			now := time.Unix(0, 0)
			return localTarget{s: NewLocalStore(func() time.Time { return now }), now: &now}
		}},
		{"durable", func(t *testing.T) modelTarget {
			now := time.Unix(0, 0)
			path := filepath.Join(t.TempDir(), "limiter.journal")
			s, err := OpenDurableStore(path, func() time.Time { return now })
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return &durableTarget{s: s, path: path, now: &now}
		}},
	}...)
}

// TestStoresAgreeWithModel: every store gives the model's answers on random
// sequences of checks (alone and in batches, members repeated across and
// within calls), releases, time moving by random amounts and exactly onto
// window edges (±1 µs), and limits and windows changing.
func TestStoresAgreeWithModel(t *testing.T) {
	testutil.PropertyChecks(t, 1000)
	for _, nt := range modelTargets() {
		t.Run(nt.name, func(t *testing.T) {
			target := nt.make(t)
			rapid.Check(t, func(rt *rapid.T) { runModelSequence(rt, target) })
		})
	}
}

var modelSizes = []time.Duration{time.Second, 2 * time.Second, 5 * time.Second, time.Minute}

// modelZones are calendar zones: two with daylight saving (New York: a
// 23-hour day in March, a 25-hour day in November; Santiago, where it
// starts at midnight, so that day's 00:00 does not exist), one without, and
// UTC.
var modelZones = []string{"America/New_York", "America/Santiago", "Asia/Shanghai", "UTC"}

// modelStarts are instants near calendar edges: the New York spring and
// autumn daylight-saving changes, a month's end in Shanghai, a UTC day.
var modelStarts = []time.Time{
	time.Date(2026, 3, 8, 6, 59, 58, 0, time.UTC),   // 01:59:58 EST, before 02:00 -> 03:00
	time.Date(2026, 11, 1, 5, 59, 58, 0, time.UTC),  // 01:59:58 EDT, before 02:00 -> 01:00
	time.Date(2026, 1, 31, 15, 59, 58, 0, time.UTC), // 23:59:58 in Shanghai, month's end
	time.Date(2026, 11, 23, 23, 59, 58, 0, time.UTC),
	time.Date(2024, 9, 8, 3, 59, 58, 0, time.UTC), // 23:59:58 in Santiago, before 00:00 -> 01:00
}

// genWindow draws one window of any kind, with small limits so that windows
// fill often (0 now and then).
func genWindow(t *rapid.T) Window {
	w := Window{Amount: rapid.Bool().Draw(t, "amount")}
	if w.Amount {
		w.Limit = rapid.Int64Range(1, 12).Draw(t, "cap")
		w.Currency = rapid.SampledFrom([]string{"", "CNY"}).Draw(t, "currency")
	} else {
		w.Limit = rapid.Int64Range(1, 4).Draw(t, "limit")
	}
	if rapid.IntRange(0, 19).Draw(t, "closed") == 0 {
		w.Limit = 0
	}
	if rapid.IntRange(0, 2).Draw(t, "calendar") == 0 {
		zone, err := time.LoadLocation(rapid.SampledFrom(modelZones).Draw(t, "zone"))
		if err != nil {
			t.Fatal(err)
		}
		w.Calendar = Calendar{
			Unit:   rapid.SampledFrom([]CalendarUnit{CalendarDay, CalendarMonth}).Draw(t, "unit"),
			Zone:   zone,
			Cutoff: rapid.SampledFrom([]time.Duration{0, 2*time.Hour + 30*time.Minute, 23 * time.Hour}).Draw(t, "cutoff"),
		}
		return w
	}
	w.Size = rapid.SampledFrom(modelSizes).Draw(t, "size")
	return w
}

// genLearning draws a learning setting for w, off now and then (which
// only a sliding count window can be on: Adaptive.learning).
func genLearning(t *rapid.T, w Window) Learning {
	if rapid.IntRange(0, 3).Draw(t, "learning off") == 0 {
		return Learning{}
	}
	a := Adaptive{}
	if rapid.Bool().Draw(t, "own setting") {
		a.Decrease = rapid.Int64Range(1, million-1).Draw(t, "decrease")
		a.Increase = rapid.Int64Range(1, million).Draw(t, "increase")
		a.Floor = rapid.Int64Range(0, 3).Draw(t, "floor")
	}
	return a.learning(w)
}

// modelMerchants are the merchants requests are drawn for: none, two
// plain IDs, and one that needs escaping in a window's key.
var modelMerchants = []string{NoMerchant, "M1", "M2", "m:{x}@y %"}

// genMerchants draws the merchant limits of w, nil half the time: a limit
// per merchant (small, so that a merchant's use fills before the window's)
// or none, and overrides for M1 (no limit, refused, or a limit).
func genMerchants(t *rapid.T, w Window) *Merchants {
	if rapid.Bool().Draw(t, "no merchant limits") || w.Limit == 0 {
		return nil
	}
	m := &Merchants{PerMerchant: Unlimited}
	if rapid.IntRange(0, 3).Draw(t, "perMerchant unset") > 0 {
		m.PerMerchant = rapid.Int64Range(0, w.Limit).Draw(t, "perMerchant")
	}
	if rapid.Bool().Draw(t, "overrides") {
		m.Overrides = map[string]int64{"M1": rapid.Int64Range(Unlimited, w.Limit).Draw(t, "M1's limit")}
	}
	return m
}

// genWindows draws the windows of one request: 1 to 3 of its own key's and
// 0 to 2 of its channel-wide key's, of distinct IDs per key, each now and
// then followed by a merchant's use of it (genMerchants); a quarter of
// the time the plainest key, one sliding count window, learning or not
// (the Redis store checks it with its plain script, and with the general one while
// a learned limit is in force).
func genWindows(t *rapid.T, own, wide Key) ([]KeyWindow, map[int]*Merchants) {
	if rapid.IntRange(0, 3).Draw(t, "plain") == 0 {
		w := Window{Limit: rapid.Int64Range(0, 4).Draw(t, "limit"), Size: rapid.SampledFrom(modelSizes).Draw(t, "size")}
		return []KeyWindow{{Key: own, Window: w, Learn: genLearning(t, w)}}, nil
	}
	var out []KeyWindow
	mls := map[int]*Merchants{}
	for _, k := range []Key{own, wide} {
		lo, hi := 1, 3
		if k == wide {
			lo, hi = 0, 2
		}
		seen := map[string]bool{}
		for n := rapid.IntRange(lo, hi).Draw(t, "windows"); n > 0; n-- {
			w := genWindow(t)
			if !seen[w.ID()] {
				seen[w.ID()] = true
				out = append(out, KeyWindow{Key: k, Window: w, Learn: genLearning(t, w)})
				if ml := genMerchants(t, w); ml != nil {
					mls[len(out)] = ml
					out = append(out, merchantWindow(k, w, ml, rapid.SampledFrom(modelMerchants).Draw(t, "merchant")))
				}
			}
		}
	}
	return out, mls
}

// ofMerchant is ws, drawn with the merchant limits mls (genWindows), for a
// request of merchant: each merchant's use of a window is that merchant's.
func ofMerchant(ws []KeyWindow, mls map[int]*Merchants, merchant string) []KeyWindow {
	out := slices.Clone(ws)
	for i, ml := range mls {
		base, _, _ := ws[i].Key.Merchant()
		out[i] = merchantWindow(base, ws[i].Window, ml, merchant)
	}
	return out
}

// merchantBatcher is a store that decides a batch of checks of several
// merchants in one call (the Redis store's coalescer).
type merchantBatcher interface {
	checkMerchants(t *rapid.T, checks []BatchCheck, now time.Time) []StoreResult
}

func (r redisTarget) checkMerchants(t *rapid.T, checks []BatchCheck, now time.Time) []StoreResult {
	*r.now = now
	out, err := r.s.CheckBatch(context.Background(), checks)
	if err != nil {
		t.Fatalf("check script: %v", err)
	}
	if len(out) != len(checks) {
		t.Fatalf("one call carries %d of %d checks of one key's windows for several merchants, want all", len(out), len(checks))
	}
	return out
}

func runModelSequence(t *rapid.T, target modelTarget) {
	own := Key{BizType: testutil.UniqueName("P"), Channel: testutil.UniqueName("C")}
	wide := ChannelWide(own.Channel)
	model := NewModel()
	model.sweepAlways = true
	ws, mls := genWindows(t, own, wide)
	// An instant near a calendar edge plus a random offset; whole
	// microseconds.
	now := rapid.SampledFrom(modelStarts).Draw(t, "start").Add(time.Duration(rapid.Int64Range(0, 3_000_000).Draw(t, "offset")) * time.Microsecond)
	// Each member pays its own amount, as a requestId does, but now and
	// then a retry carries another (a conflict, by the identity rule).
	amounts := rapid.SliceOfN(rapid.Int64Range(1, 6), 6, 6).Draw(t, "amounts")
	member := rapid.Custom(func(t *rapid.T) checkMember {
		i := rapid.IntRange(0, 5).Draw(t, "member")
		m := checkMember{id: fmt.Sprintf("m%d", i), amount: amounts[i]}
		if rapid.IntRange(0, 5).Draw(t, "other amount") == 0 {
			m.amount = rapid.Int64Range(1, 6).Draw(t, "amount")
		}
		return m
	})

	compare := func(what string, got, want []StoreResult) {
		for i := range want {
			if fmt.Sprint(got[i]) != fmt.Sprint(want[i]) {
				t.Fatalf("%s at %s (%d µs), windows %v: member %d\n got %+v\nwant %+v (model)", what, now.UTC().Format(time.RFC3339Nano), micros(now), ws, i, got[i], want[i])
			}
		}
	}
	t.Repeat(map[string]func(*rapid.T){
		"check": func(t *rapid.T) {
			m := member.Draw(t, "member")
			compare("check "+m.id, target.checkBatch(t, ws, []checkMember{m}, now), []StoreResult{model.Check(ws, m.id, m.amount, now)})
		},
		"batch": func(t *rapid.T) {
			ms := rapid.SliceOfN(member, 2, 8).Draw(t, "members")
			want := make([]StoreResult, len(ms))
			for i, m := range ms {
				want[i] = model.Check(ws, m.id, m.amount, now)
			}
			compare(fmt.Sprintf("batch %v", ms), target.checkBatch(t, ws, ms, now), want)
		},
		// merchants is a batch of checks by several merchants, as the
		// coalescer sends one: each member in its own merchant's windows.
		"merchants": func(t *rapid.T) {
			mb, ok := target.(merchantBatcher)
			if !ok || len(mls) == 0 {
				t.Skip("no batches, or no merchant limits")
			}
			ms := rapid.SliceOfN(member, 2, 8).Draw(t, "members")
			checks := make([]BatchCheck, len(ms))
			want := make([]StoreResult, len(ms))
			for i, m := range ms {
				own := ofMerchant(ws, mls, rapid.SampledFrom(modelMerchants).Draw(t, "merchant"))
				checks[i] = BatchCheck{Windows: own, Member: m.id, Amount: m.amount}
				want[i] = model.Check(own, m.id, m.amount, now)
			}
			got := mb.checkMerchants(t, checks, now)
			for i := range want {
				if fmt.Sprint(got[i]) != fmt.Sprint(want[i]) {
					t.Fatalf("merchants' batch at %d µs: member %d (%s), windows %v\n got %+v\nwant %+v (model)", micros(now), i, ms[i].id, checks[i].Windows, got[i], want[i])
				}
			}
		},
		"release": func(t *rapid.T) {
			m := member.Draw(t, "member")
			before := target.usage(t, ws, now)
			found := target.release(t, ws, m.id, nil)
			model.Release(ws, m.id)
			// Whether a record past its window is still found depends on
			// when each store sweeps; what found promises is that a
			// release that found nothing changed nothing, and that a
			// second release finds nothing.
			if after := target.usage(t, ws, now); !found && !slices.Equal(after, before) {
				t.Fatalf("release %s found nothing but changed the use from %v to %v", m.id, before, after)
			}
			if target.release(t, ws, m.id, nil) {
				t.Fatalf("release %s again: found it", m.id)
			}
		},
		// releaseIfAmount gives back a member's records for one amount
		// only, as for a check whose answer was lost: the member's own
		// amount, or another (a record it must leave alone).
		"releaseIfAmount": func(t *rapid.T) {
			m := member.Draw(t, "member")
			amount := m.amount
			if rapid.Bool().Draw(t, "another amount") {
				amount = rapid.Int64Range(1, 6).Draw(t, "amount")
			}
			before := target.usage(t, ws, now)
			found := target.release(t, ws, m.id, &amount)
			model.ReleaseIfAmount(ws, m.id, amount)
			if after := target.usage(t, ws, now); !found && !slices.Equal(after, before) {
				t.Fatalf("release %s for %d found nothing but changed the use from %v to %v", m.id, amount, before, after)
			}
			if want := model.Usage(ws, now); !slices.Equal(target.usage(t, ws, now), want) {
				t.Fatalf("release %s for %d: use %v, want %v (model)", m.id, amount, target.usage(t, ws, now), want)
			}
		},
		// releaseKeys releases a member from its keys' windows only, as a
		// release does under a document without merchant limits, or one
		// given windows read from the registry: a merchant's use of a
		// window keeps its record of the member, which the window no
		// longer holds, and still answers for it.
		"releaseKeys": func(t *rapid.T) {
			if len(mls) == 0 {
				t.Skip("no merchant limits")
			}
			m := member.Draw(t, "member")
			var keys []KeyWindow
			for i, w := range ws {
				if mls[i] == nil {
					keys = append(keys, w)
				}
			}
			target.release(t, keys, m.id, nil)
			model.Release(keys, m.id)
		},
		// releaseAmounts gives a member's amount back, as after a decline.
		"releaseAmounts": func(t *rapid.T) {
			m := member.Draw(t, "member")
			var amountWindows []KeyWindow
			for _, w := range ws {
				if w.Amount {
					amountWindows = append(amountWindows, w)
				}
			}
			if len(amountWindows) == 0 {
				t.Skip("no amount window")
			}
			target.release(t, amountWindows, m.id, nil)
			model.Release(amountWindows, m.id)
		},
		"advance": func(t *rapid.T) {
			now = now.Add(time.Duration(rapid.Int64Range(0, 3_000_000).Draw(t, "µs")) * time.Microsecond)
		},
		// leap moves time across many windows, past learned limits' ends.
		"leap": func(t *rapid.T) {
			now = now.Add(time.Duration(rapid.Int64Range(0, 300_000_000).Draw(t, "µs")) * time.Microsecond)
		},
		// throttle is the channel's throttle, with or without its
		// retry-after, on every window (the stores skip those that do not
		// learn).
		"throttle": func(t *rapid.T) {
			var ra time.Duration
			if rapid.Bool().Draw(t, "retry-after") {
				ra = time.Duration(rapid.Int64Range(0, 3_000_000).Draw(t, "retry-after µs")) * time.Microsecond
			}
			target.throttle(t, ws, now, ra)
			model.Throttle(ws, now, ra)
		},
		// storm is several throttles at one instant: they must not compound.
		"storm": func(t *rapid.T) {
			for n := rapid.IntRange(2, 5).Draw(t, "throttles"); n > 0; n-- {
				target.throttle(t, ws, now, 0)
				model.Throttle(ws, now, 0)
			}
		},
		// learnedEdge moves time onto a learned limit's edge: its end, its
		// not-before, or a whole number of windows after its throttle (a
		// step up), or 1 µs either side.
		"learnedEdge": func(t *rapid.T) {
			w := ws[rapid.IntRange(0, len(ws)-1).Draw(t, "window")]
			st, ok := model.learned[idOf(w)]
			if !ok || !w.Learns() {
				t.Skip("no learned limit")
			}
			at := time.UnixMicro(rapid.SampledFrom([]int64{st.e, st.nb, st.t + rapid.Int64Range(1, 4).Draw(t, "windows")*w.Size.Microseconds()}).Draw(t, "edge"))
			at = at.Add(time.Duration(rapid.Int64Range(-1, 1).Draw(t, "δ")) * time.Microsecond)
			if at.Before(now) {
				t.Skip("in the past")
			}
			now = at
		},
		// edge moves time to the instant a member leaves a sliding window,
		// or to a calendar window's next period, or 1 µs either side.
		"edge": func(t *rapid.T) {
			w := ws[rapid.IntRange(0, len(ws)-1).Draw(t, "window")]
			var at time.Time
			if w.IsCalendar() {
				_, end := w.Calendar.Period(now)
				at = end
			} else {
				q := model.sliding[idOf(w)]
				if q == nil || q.len() == 0 {
					t.Skip("empty window")
				}
				e := q.get(rapid.IntRange(0, q.len()-1).Draw(t, "entry"))
				at = time.UnixMicro(e.at + w.Size.Microseconds())
			}
			at = at.Add(time.Duration(rapid.Int64Range(-1, 1).Draw(t, "δ")) * time.Microsecond)
			if at.Before(now) {
				t.Skip("in the past")
			}
			now = at
		},
		"limits": func(t *rapid.T) { ws, mls = genWindows(t, own, wide) },
		"": func(t *rapid.T) {
			got, want := target.usage(t, ws, now), model.Usage(ws, now)
			if !slices.Equal(got, want) {
				t.Fatalf("usage at %d µs, windows %v: got %v, want %v (model)", micros(now), ws, got, want)
			}
			if got, want := target.learned(t, ws, now), model.Learned(ws, now); !sameLearned(got, want) {
				t.Fatalf("learned at %d µs, windows %v:\n got %+v\nwant %+v (model)", micros(now), ws, got, want)
			}
		},
	})
}

// sameLearned reports whether two reports of learned limits are equal,
// their times to the microsecond.
func sameLearned(a, b []LearnedLimit) bool {
	return slices.EqualFunc(a, b, func(x, y LearnedLimit) bool {
		return x.Key == y.Key && x.Window == y.Window && x.Limit == y.Limit && x.Learned == y.Learned &&
			x.Since.Equal(y.Since) && x.NotBefore.Equal(y.NotBefore) && x.Until.Equal(y.Until)
	})
}
