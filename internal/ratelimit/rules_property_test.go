package ratelimit

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"payserver/internal/testutil"
)

// TestLimiterAgreesWithModel: the Limiter, on every store, decides as
// Model.Decide on random sequences of payments of three bizTypes and
// resolver queries (RESOLVE) on one channel, with amounts in two
// currencies, for four merchants (one of them none), under random rules:
// its own key's windows (counts and amounts, some for one currency; counts
// only for RESOLVE), the channel's channel-wide key with reservations for
// one bizType, limits per merchant with overrides on any window but
// RESOLVE's, and a schedule of
// either key that starts and ends within the sequence; with releases and
// amounts given back. This covers the rules the store-level test cannot:
// which windows apply to a request, reservations, and schedules switching
// on the clock. Beside the model, two claims are checked on their own: an
// admission carries the model's admission time and names every window
// that counts it, and a resolver query changes no channel-wide window's
// use and is unlimited when its key has no rule (if the model and the
// limiter both counted queries channel-wide, they would agree, and only
// these checks would fail).
func TestLimiterAgreesWithModel(t *testing.T) {
	testutil.PropertyChecks(t, 1000)
	type namedStore struct {
		name  string
		store func(t *testing.T, now *time.Time) Store
	}
	var stores []namedStore
	for _, srv := range theRedisServers() {
		stores = append(stores, namedStore{srv.Name, func(t *testing.T, now *time.Time) Store { return srv.New(t, "test:rules:", now) }})
	}
	stores = append(stores, namedStore{"local", func(t *testing.T, now *time.Time) Store {
		return NewLocalStore(func() time.Time { return *now })
	}})
	for _, nt := range stores {
		t.Run(nt.name, func(t *testing.T) {
			now := new(time.Time)
			*now = time.Unix(1_700_000_000, 0) // the in-process store's clock starts here
			store := nt.store(t, now)
			rapid.Check(t, func(rt *rapid.T) { runRulesSequence(rt, store, now) })
		})
	}
}

// genRule draws a rule of 1 to 3 windows with distinct IDs, and, when
// reserve is set, reservations for REFUND, PAY or both on some windows
// (within the window's limit, as the document requires).
func genRule(t *rapid.T, reserve bool) Rule {
	var r Rule
	seen := map[string]bool{}
	for n := rapid.IntRange(1, 3).Draw(t, "windows"); n > 0; n-- {
		w := genWindow(t)
		if seen[w.ID()] {
			continue
		}
		seen[w.ID()] = true
		r.Windows = append(r.Windows, w)
		var res map[string]int64
		if reserve && rapid.Bool().Draw(t, "reserve") {
			res = map[string]int64{}
			left := w.Limit
			for _, name := range rapid.SampledFrom([][]string{{"REFUND"}, {"PAY"}, {"REFUND", "PAY"}}).Draw(t, "reserved for") {
				n := rapid.Int64Range(0, left).Draw(t, "reserved")
				res[name], left = n, left-n
			}
		}
		r.Reserve = append(r.Reserve, res)
		r.Merchants = append(r.Merchants, genMerchants(t, w))
	}
	switch rapid.IntRange(0, 3).Draw(t, "adaptive") {
	case 0:
		r.Adaptive.Off = true
	case 1:
		r.Adaptive = Adaptive{Decrease: rapid.Int64Range(1, million-1).Draw(t, "decrease"), Increase: rapid.Int64Range(1, million).Draw(t, "increase"), Floor: rapid.Int64Range(0, 2).Draw(t, "floor")}
	}
	return r
}

func runRulesSequence(t *rapid.T, store Store, now *time.Time) {
	ch := testutil.UniqueName("R")
	*now = rapid.SampledFrom(modelStarts).Draw(t, "start").Add(time.Duration(rapid.Int64Range(0, 3_000_000).Draw(t, "offset")) * time.Microsecond)
	// Two documents: the sequence may switch between them, so a release
	// after a document resized or dropped a window must still free the slot
	// the member holds there (the hold remembers its windows).
	docs := []*Config{genRulesConfig(t, ch, *now), nil}
	if rapid.Bool().Draw(t, "second document") {
		docs[1] = genRulesConfig(t, ch, *now)
	}
	cfg := docs[0]
	l, err := New(store, Options{Timeout: 5 * time.Second, DisableNearCache: true, Now: func() time.Time { return *now }})
	if err != nil {
		t.Fatal(err)
	}
	l.SetConfig(cfg)
	model := NewModel()
	model.sweepAlways = true
	amounts := rapid.SliceOfN(rapid.Int64Range(0, 6), 6, 6).Draw(t, "amounts")
	currencies := rapid.SliceOfN(rapid.SampledFrom([]string{"CNY", "USD"}), 6, 6).Draw(t, "currencies")
	bizTypes := rapid.SliceOfN(rapid.SampledFrom([]string{"PAY", "REFUND", "OTHER", ResolveBizType}), 6, 6).Draw(t, "bizTypes")
	merchants := rapid.SliceOfN(rapid.SampledFrom([]string{"", "M1", "M2", "m:{x}@y %"}), 6, 6).Draw(t, "merchants")
	request := func(t *rapid.T) Request {
		i := rapid.IntRange(0, 5).Draw(t, "member")
		return Request{Key: Key{BizType: bizTypes[i], Channel: ch}, Member: fmt.Sprintf("m%d", i), Amount: amounts[i], Currency: currencies[i], Merchant: merchants[i],
			Regardless: rapid.IntRange(0, 7).Draw(t, "regardless") == 0}
	}
	// holds keeps every hold a member was admitted with: releasing them all
	// frees every window any admission recorded it in, as the model's
	// ReleaseKey does.
	holds := map[string][]Hold{}
	release := func(t *rapid.T, r Request, amountsOnly bool) {
		for _, h := range append(holds[r.Member], HoldOf(r.Key, r.Member)) {
			if h.Key != r.Key {
				continue
			}
			f := l.Release
			if amountsOnly {
				f = l.ReleaseAmount
			}
			if err := f(context.Background(), h); err != nil {
				t.Fatal(err)
			}
		}
		model.ReleaseKey(r.Key, r.Member, amountsOnly)
	}
	t.Repeat(map[string]func(*rapid.T){
		"switch": func(t *rapid.T) {
			if docs[1] == nil {
				t.Skip("one document")
			}
			docs[0], docs[1] = docs[1], docs[0]
			cfg = docs[0]
			l.SetConfig(cfg)
		},
		"check": func(t *rapid.T) {
			r := request(t)
			var wideBefore []int64
			if r.Key.IsResolve() {
				wideBefore = wideUse(t, l, ch)
			}
			got, err := l.Check(context.Background(), r)
			if err != nil {
				t.Fatal(err)
			}
			if got.Allowed {
				holds[r.Member] = append(holds[r.Member], got.Hold)
			}
			if r.Key.IsResolve() {
				if after := wideUse(t, l, ch); !slices.Equal(after, wideBefore) {
					t.Fatalf("%+v at %s: channel-wide use %v -> %v: a resolver query counted channel-wide (%+v)", r, now.UTC().Format(time.RFC3339Nano), wideBefore, after, got)
				}
				for _, u := range got.Windows {
					if u.Scope != r.Key {
						t.Fatalf("%+v: checked against %s's window %s, want %s's only", r, u.Scope, u.Name(), r.Key)
					}
				}
				if cfg.RuleAt(r.Key, *now).IsUnlimited() && got.Source != SourceUnlimited {
					t.Fatalf("%+v without a rule of its own: %+v, want unlimited", r, got)
				}
			}
			windows := applicable(cfg, r, *now)
			if len(windows) == 0 {
				if !got.Allowed || got.Source != SourceUnlimited {
					t.Fatalf("%+v at %s: got %+v, want unlimited", r, now.UTC().Format(time.RFC3339Nano), got)
				}
				return
			}
			if got.Closed() {
				// Decided without the store, naming a window that refuses
				// everything: the model refuses and records nothing too.
				closedBy := false
				for _, w := range windows {
					closedBy = closedBy || (w.Limit == 0 && got.Scope == w.Key.base() && got.Merchant == w.Merchant && got.Rule == w.Name())
				}
				if !closedBy || got.Limit != 0 {
					t.Fatalf("%+v at %s, windows %v:\n got %+v, closed by no window of limit 0", r, now.UTC().Format(time.RFC3339Nano), windows, got)
				}
				return
			}
			want := model.Check(windows, r.Member, r.Amount, *now)
			w := windows[want.Window]
			limit := w.Limit
			if want.Limits != nil {
				limit = want.Limits[want.Window]
			}
			if got.Allowed != want.Allowed || got.Scope != w.Key.base() || got.Merchant != w.Merchant || got.Rule != w.Name() || got.Limit != limit || got.Configured != w.Limit || got.Learned != (limit < w.Limit) {
				t.Fatalf("%+v at %s, windows %v:\n got %+v\nwant %+v (model)", r, now.UTC().Format(time.RFC3339Nano), windows, got, want)
			}
			if got.Count != want.Count || got.RetryAfter != want.RetryAfter || got.Duplicate != want.Duplicate || got.ExceedsCap != want.ExceedsCap {
				t.Fatalf("%+v at %s, windows %v:\n got %+v\nwant %+v (model)", r, now.UTC().Format(time.RFC3339Nano), windows, got, want)
			}
			for i, u := range got.Windows {
				if u.Count != want.Counts[i] {
					t.Fatalf("%+v: window %d use %d, want %d (model)", r, i, u.Count, want.Counts[i])
				}
			}
			if got.Allowed && !got.Shadow {
				counting := 0
				for _, w := range windows {
					if w.Track != TrackOther {
						counting++
					}
				}
				if !got.AdmittedAt.Equal(want.At) || len(got.WindowKeys) != counting {
					t.Fatalf("%+v: admitted at %v in %q, want %v (model) in %d windows", r, got.AdmittedAt, got.WindowKeys, want.At, counting)
				}
			}
		},
		// throttle: the channel throttled a member's call (its latest
		// hold, or one with unknown windows), with or without a
		// retry-after.
		"throttle": func(t *rapid.T) {
			r := request(t)
			h := HoldOf(r.Key, r.Member)
			if hs := holds[r.Member]; len(hs) > 0 && hs[len(hs)-1].Key == r.Key {
				h = hs[len(hs)-1]
			}
			var ra time.Duration
			if rapid.Bool().Draw(t, "retry-after") {
				ra = time.Duration(rapid.Int64Range(0, 2_000_000).Draw(t, "retry-after µs")) * time.Microsecond
			}
			if err := l.Throttled(context.Background(), h, ra); err != nil {
				t.Fatal(err)
			}
			model.Throttle(learningWindows(cfg, h, *now), *now, ra)
		},
		"release":  func(t *rapid.T) { release(t, request(t), false) },
		"giveBack": func(t *rapid.T) { release(t, request(t), true) },
		"advance": func(t *rapid.T) {
			*now = now.Add(time.Duration(rapid.Int64Range(0, 1_500_000).Draw(t, "µs")) * time.Microsecond)
		},
	})
}

// wideUse is the use of the channel-wide windows of ch in force.
func wideUse(t *rapid.T, l *Limiter, ch string) []int64 {
	_, use, err := l.Usage(context.Background(), ChannelWide(ch))
	if err != nil {
		t.Fatal(err)
	}
	return use
}

// genRulesConfig draws a limits document for channel ch: rules for PAY,
// REFUND, RESOLVE and the channel-wide key, each maybe, and maybe one
// schedule starting within 4 s of now.
func genRulesConfig(t *rapid.T, ch string, now time.Time) *Config {
	wide := ChannelWide(ch)
	cfg := &Config{Rules: map[Key]Rule{}}
	for _, biz := range []string{"PAY", "REFUND"} {
		if rapid.Bool().Draw(t, "limited "+biz) {
			cfg.Rules[Key{BizType: biz, Channel: ch}] = genRule(t, false)
		}
	}
	if rapid.Bool().Draw(t, "limited RESOLVE") {
		// A RESOLVE key takes count windows only.
		r := genRule(t, false)
		r.Windows = slices.DeleteFunc(r.Windows, func(w Window) bool { return w.Amount })
		r.Reserve, r.Merchants = nil, nil
		cfg.Rules[ResolveKey(ch)] = r
	}
	if rapid.Bool().Draw(t, "channel-wide") {
		cfg.Rules[wide] = genRule(t, true)
	}
	if rapid.Bool().Draw(t, "schedule") {
		k := rapid.SampledFrom([]Key{{BizType: "PAY", Channel: ch}, wide}).Draw(t, "schedule key")
		from := now.Add(time.Duration(rapid.Int64Range(0, 4_000_000).Draw(t, "from µs")) * time.Microsecond)
		cfg.Schedules = []Schedule{{Key: k, From: from, To: from.Add(time.Duration(rapid.Int64Range(1, 4_000_000).Draw(t, "length µs")) * time.Microsecond),
			Rule: genRule(t, k == wide)}}
	}
	return cfg
}
