package ratelimit

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"payserver/internal/testutil"
)

func TestResolveKey(t *testing.T) {
	k := ResolveKey("ALIPAY")
	if k != (Key{BizType: "RESOLVE", Channel: "ALIPAY"}) || k.String() != "RESOLVE:ALIPAY" || !k.IsResolve() || k.CountsChannelWide() {
		t.Fatalf("ResolveKey(ALIPAY) = %v, want RESOLVE:ALIPAY, counted on its own only", k)
	}
	if pay := (Key{BizType: "PAY", Channel: "ALIPAY"}); pay.IsResolve() || !pay.CountsChannelWide() {
		t.Fatalf("PAY:ALIPAY: got resolve %t, counted channel-wide %t; want false, true", pay.IsResolve(), pay.CountsChannelWide())
	}
}

// TestApplicableResolveOwnKeyOnly: the model checks a resolver query
// against its own key's windows only: none of the channel-wide key's, none
// counting or keeping a reservation, whatever those rules are; a payment
// of the same channel gets all of them.
func TestApplicableResolveOwnKeyOnly(t *testing.T) {
	res, wide := ResolveKey("CH"), ChannelWide("CH")
	cfg := &Config{Rules: map[Key]Rule{
		res:  {Windows: []Window{{Limit: 3, Size: time.Minute}}},
		wide: {Windows: []Window{{Limit: 2, Size: time.Minute}, {Limit: 5, Size: time.Hour}}, Reserve: []map[string]int64{{"REFUND": 1, "RESOLVE": 1}}},
	}}
	now := time.Unix(1_800_000_000, 0)
	got := applicable(cfg, Request{Key: res, Member: "q"}, now)
	if len(got) != 1 || got[0].Key != res || got[0].Track != TrackNone || got[0].Reserved != nil {
		t.Fatalf("applicable(RESOLVE:CH) = %+v, want RESOLVE:CH's window only", got)
	}
	pay := applicable(cfg, Request{Key: Key{BizType: "PAY", Channel: "CH"}, Member: "p"}, now)
	if n := len(slices.DeleteFunc(slices.Clone(pay), func(w KeyWindow) bool { return w.Key != wide })); n != 2 {
		t.Fatalf("applicable(PAY:CH) = %+v, want the two channel-wide windows", pay)
	}
	if d := releaseWindows(cfg, res, now, false, ""); len(d) != 1 || d[0].Key != res {
		t.Fatalf("releaseWindows(RESOLVE:CH) = %+v, want RESOLVE:CH's window only", d)
	}
}

// resolveStores are every Store, each made fresh for a test.
func resolveStores() []struct {
	name string
	make func(t *testing.T) Store
} {
	var out []struct {
		name string
		make func(t *testing.T) Store
	}
	for _, srv := range theRedisServers() {
		out = append(out, struct {
			name string
			make func(t *testing.T) Store
		}{srv.Name, func(t *testing.T) Store { return srv.New(t, "test:resolve:", nil) }})
	}
	return append(out, []struct {
		name string
		make func(t *testing.T) Store
	}{
		{"local", func(t *testing.T) Store { return NewLocalStore(nil) }},
		{"durable", func(t *testing.T) Store {
			s, err := OpenDurableStore(filepath.Join(t.TempDir(), "limiter.journal"), nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s
		}},
	}...)
}

// TestResolveCountsOnlyOnItsKey, on every store: resolver queries fill
// their own key and nothing else. The channel-wide window (limit 2, one
// kept for REFUND) still takes one payment and one refund after three
// queries, and reports their two admissions only; the queries are refused
// by their own key alone. A channel whose RESOLVE key the document does
// not set has unlimited queries, even while its channel-wide key is
// closed. (Counted in the channel-wide window, or held to REFUND's
// reservation, the queries would be refused after the first.)
func TestResolveCountsOnlyOnItsKey(t *testing.T) {
	for _, st := range resolveStores() {
		t.Run(st.name, func(t *testing.T) {
			ch, other := testutil.UniqueName("C"), testutil.UniqueName("D")
			cfg := &Config{Rules: map[Key]Rule{
				ChannelWide(ch):    {Windows: []Window{{Limit: 2, Size: time.Minute}}, Reserve: []map[string]int64{{"REFUND": 1}}},
				ResolveKey(ch):     {Windows: []Window{{Limit: 3, Size: time.Minute}}},
				ChannelWide(other): {Windows: []Window{{Limit: 0, Size: time.Second}}},
			}}
			l := mustLimiter(t, st.make(t), Options{Timeout: 5 * time.Second, DisableNearCache: true}, cfg)
			q := ResolveKey(ch)
			for i := range 3 {
				d := mustDecide(t, l, Request{Key: q, Member: fmt.Sprintf("#resolve:o%d:query", i)})
				if !d.Allowed || d.Scope != q || len(d.Windows) != 1 || d.Windows[0].Scope != q {
					t.Fatalf("query %d: got %+v, want admitted by RESOLVE:%s alone", i, d, ch)
				}
				if len(d.WindowKeys) != 1 || !strings.Contains(d.WindowKeys[0], ":RESOLVE:") {
					t.Fatalf("query %d: window keys %q, want RESOLVE:%s's only", i, d.WindowKeys, ch)
				}
			}
			if d := mustDecide(t, l, Request{Key: q, Member: "#resolve:o3:query"}); d.Allowed || d.Scope != q {
				t.Fatalf("4th query: got %+v, want refused by RESOLVE:%s", d, ch)
			}
			if d := mustDecide(t, l, Request{Key: Key{BizType: "PAY", Channel: ch}, Member: "p1"}); !d.Allowed {
				t.Fatalf("payment after the queries: %+v, want admitted: the channel-wide window counts no query", d)
			}
			if d := mustDecide(t, l, Request{Key: Key{BizType: "REFUND", Channel: ch}, Member: "r1"}); !d.Allowed {
				t.Fatalf("refund after the queries: %+v, want admitted: its reservation is untouched", d)
			}
			_, use, err := l.Usage(context.Background(), ChannelWide(ch))
			if err != nil || !slices.Equal(use, []int64{2}) {
				t.Fatalf("channel-wide use %v (%v), want [2]: the payment and the refund", use, err)
			}
			if d := mustDecide(t, l, Request{Key: ResolveKey(other), Member: "q"}); !d.Allowed || d.Source != SourceUnlimited {
				t.Fatalf("query on a channel without a RESOLVE key, its channel-wide key closed: %+v, want unlimited", d)
			}
			if err := l.Release(context.Background(), HoldOf(q, "#resolve:o0:query")); err != nil {
				t.Fatal(err)
			}
			if d := mustDecide(t, l, Request{Key: q, Member: "#resolve:o3:query"}); !d.Allowed {
				t.Fatalf("query after a release: %+v, want admitted", d)
			}
		})
	}
}
