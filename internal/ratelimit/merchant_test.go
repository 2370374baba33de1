package ratelimit

import (
	"fmt"
	"testing"
	"time"
)

// TestModelMerchantLimits: the merchant rule on hand-worked cases, each
// value computed by hand from Model's doc comment.
func TestModelMerchantLimits(t *testing.T) {
	k := Key{BizType: "PAY", Channel: "U"}
	wide := ChannelWide("U")
	t0 := time.UnixMicro(1_800_000_000_000_000)
	ms := time.Millisecond
	// {limit: 5, window: 1s, perMerchant: 2, merchants: {VIP: 4, FREE: -1, BAD: 0}}
	// on PAY:U, and {limit: 6, window: 1s} on *:U.
	cfg := &Config{Rules: map[Key]Rule{
		k:    {Windows: []Window{{Limit: 5, Size: time.Second}}, Merchants: []*Merchants{{PerMerchant: 2, Overrides: map[string]int64{"VIP": 4, "FREE": Unlimited, "BAD": 0}}}},
		wide: {Windows: []Window{{Limit: 6, Size: time.Second}}},
	}}
	decide := func(m *Model, member, merchant string, at time.Duration) ([]KeyWindow, StoreResult) {
		return m.Decide(cfg, Request{Key: k, Member: member, Merchant: merchant}, t0.Add(at))
	}
	t.Run("a merchant's refusal records nothing anywhere and waits for its own use", func(t *testing.T) {
		m := NewModel()
		decide(m, "a1", "A", 0)
		decide(m, "b1", "B", 100*ms)
		decide(m, "a2", "A", 200*ms)
		ws, got := decide(m, "a3", "A", 300*ms)
		if got.Allowed || ws[got.Window].Merchant != "A" || got.Count != 2 || got.RetryAfter != 700*ms {
			t.Fatalf("a3: got %+v of %v, want refused by A's limit (use 2) for 700ms", got, ws)
		}
		if want := "[3 2 3]"; fmt.Sprint(got.Counts) != want {
			t.Fatalf("counts after A's refusal = %v, want %s (nothing recorded)", got.Counts, want)
		}
		// B still has room in the window; A's refusal used none of it.
		if _, got := decide(m, "b2", "B", 300*ms); !got.Allowed || fmt.Sprint(got.Counts) != "[4 2 4]" {
			t.Fatalf("b2: got %+v, want admitted, counts [4 2 4]", got)
		}
		// At 1 s a1 leaves: A has room again.
		if _, got := decide(m, "a3", "A", time.Second); !got.Allowed {
			t.Fatalf("a3 at 1s: got %+v, want admitted", got)
		}
	})
	t.Run("overrides: a larger limit, none, refused", func(t *testing.T) {
		m := NewModel()
		for i, at := range []time.Duration{0, 10 * ms, 20 * ms, 30 * ms} {
			if _, got := decide(m, fmt.Sprint("v", i), "VIP", at); !got.Allowed {
				t.Fatalf("VIP's request %d: got %+v, want admitted (limit 4)", i+1, got)
			}
		}
		// FREE has no merchant limit: only the window's (5, 4 used) binds.
		if _, got := decide(m, "f1", "FREE", 40*ms); !got.Allowed {
			t.Fatalf("f1: got %+v, want admitted", got)
		}
		ws, got := decide(m, "f2", "FREE", 50*ms)
		if got.Allowed || ws[got.Window].Merchant != "" || got.RetryAfter != 950*ms {
			t.Fatalf("f2: got %+v, want refused by the window for 950ms", got)
		}
		ws, got = decide(NewModel(), "x", "BAD", 0)
		if got.Allowed || ws[got.Window].Merchant != "BAD" || !got.ExceedsCap {
			t.Fatalf("BAD: got %+v, want refused by its limit 0", got)
		}
	})
	t.Run("a request naming no merchant counts as the merchant -", func(t *testing.T) {
		m := NewModel()
		decide(m, "n1", "", 0)
		decide(m, "n2", NoMerchant, 0)
		ws, got := decide(m, "n3", "", 0)
		if got.Allowed || ws[got.Window].Merchant != NoMerchant || ws[got.Window].Key != MerchantKey(k, NoMerchant) {
			t.Fatalf("n3: got %+v of %v, want refused by the limit of merchant -", got, ws)
		}
	})
	t.Run("a duplicate and a release act on the merchant's use too", func(t *testing.T) {
		m := NewModel()
		decide(m, "a1", "A", 0)
		if _, got := decide(m, "a1", "A", 10*ms); !got.Allowed || !got.Duplicate || fmt.Sprint(got.Counts) != "[1 1 1]" {
			t.Fatalf("a1 again: got %+v, want a duplicate counted once", got)
		}
		decide(m, "a2", "A", 20*ms)
		m.ReleaseKey(k, "a1", false)
		if _, got := decide(m, "a3", "A", 30*ms); !got.Allowed || fmt.Sprint(got.Counts) != "[2 2 2]" {
			t.Fatalf("a3 after a1's release: got %+v, want admitted, counts [2 2 2]", got)
		}
	})
	t.Run("a member held for one merchant is the same slot for another, counted once", func(t *testing.T) {
		m := NewModel()
		decide(m, "r1", "A", 0)
		if _, got := decide(m, "r1", "B", 10*ms); !got.Allowed || !got.Duplicate || fmt.Sprint(got.Counts) != "[1 0 1]" {
			t.Fatalf("r1 for B: got %+v, want a duplicate of A's slot, recorded nowhere (counts [1 0 1])", got)
		}
		decide(m, "b1", "B", 20*ms)
		if _, got := decide(m, "b2", "B", 30*ms); !got.Allowed || fmt.Sprint(got.Counts) != "[3 2 3]" {
			t.Fatalf("b2: got %+v, want admitted: B's use holds only b1", got)
		}
	})
}

func TestMerchantKeyRoundTrip(t *testing.T) {
	k := Key{BizType: "PAY", Channel: "U"}
	for _, m := range []string{"M1", NoMerchant, "m:{x}@y %", "商户-7", "a.b_c"} {
		mk := MerchantKey(k, m)
		base, got, ok := mk.Merchant()
		if !ok || base != k || got != m {
			t.Errorf("MerchantKey(%q) = %q: Merchant() = %v %q %t, want %v %q", m, mk.BizType, base, got, ok, k, m)
		}
		w, err := ParseWindowKey(WindowKey(KeyWindow{Key: mk, Window: Window{Limit: 1, Size: time.Second}}))
		if err != nil || w.Key != mk || w.Merchant != m {
			t.Errorf("ParseWindowKey of %q's window: %+v, %v", m, w, err)
		}
	}
	if _, _, ok := k.Merchant(); ok {
		t.Errorf("%v reads as a merchant key", k)
	}
}
