package ratelimit

import (
	"fmt"
	"testing"
	"time"
)

// TestModelExamples: the rules on hand-worked cases, each value computed by
// hand from the rules in Model's doc comment.
func TestModelExamples(t *testing.T) {
	k := Key{BizType: "A", Channel: "B"}
	t0 := time.UnixMicro(1_800_000_000_000_000)
	sec, min := time.Second, time.Minute
	t.Run("held by one full window, refused by another", func(t *testing.T) {
		m := NewModel()
		ws := []Window{{Limit: 1, Size: sec}, {Limit: 1, Size: min}}
		m.Check(KeyWindows(k, ws), "a", 1, t0)
		// 1.5 s later "a" has left the 1 s window but is held by the full
		// minute; the 1 s window has room: admitted, recorded there.
		got := m.Check(KeyWindows(k, ws), "a", 1, t0.Add(1500*time.Millisecond))
		if !got.Allowed || !got.Duplicate || fmt.Sprint(got.Counts) != "[1 1]" {
			t.Fatalf("got %+v, want admitted as a duplicate, counts [1 1]", got)
		}
		// A full 1 s window that does not hold "b" refuses it, though b is
		// in no window at all; and "c", held by neither, likewise.
		m.Check(KeyWindows(k, []Window{{Limit: 1, Size: sec}, {Limit: 5, Size: min}}), "b", 1, t0.Add(3*sec))
		got = m.Check(KeyWindows(k, []Window{{Limit: 1, Size: sec}, {Limit: 5, Size: min}}), "c", 1, t0.Add(3*sec+100*time.Millisecond))
		if got.Allowed || got.Window != 0 || got.RetryAfter != 900*time.Millisecond {
			t.Fatalf("got %+v, want refused by the 1 s window for 900ms", got)
		}
	})
	t.Run("binding window under a lowered limit", func(t *testing.T) {
		m := NewModel()
		ws := []Window{{Limit: 4, Size: sec}, {Limit: 100, Size: min}}
		for _, x := range []string{"a", "b", "c", "d"} {
			m.Check(KeyWindows(k, ws), x, 1, t0)
		}
		// The 1 s limit is lowered to 1 under its 4 members; "a" is held
		// by both windows and admitted again. The binding window is the
		// one with the least room: the 1 s window, 3 over its limit.
		got := m.Check(KeyWindows(k, []Window{{Limit: 1, Size: sec}, {Limit: 100, Size: min}}), "a", 1, t0.Add(time.Millisecond))
		if !got.Allowed || got.Window != 0 || got.Count != 4 {
			t.Fatalf("got %+v, want admitted, binding window 0 with count 4", got)
		}
	})
	t.Run("retry-after from the member that must leave", func(t *testing.T) {
		m := NewModel()
		ws := []Window{{Limit: 2, Size: 10 * sec}}
		m.Check(KeyWindows(k, ws), "old", 1, t0)
		// a is admitted; b and c are refused: b waits for "old" (9.7 s
		// left), c likewise (the rank count-limit = 0 member).
		got := checkBatch(m, KeyWindows(k, ws), []string{"a", "b", "c"}, t0.Add(300*time.Millisecond))
		if !got[0].Allowed || got[1].Allowed || got[1].RetryAfter != 9700*time.Millisecond {
			t.Fatalf("got %+v, want a admitted and b refused for 9.7s", got)
		}
		// Limit 0 never has room: its size.
		if got := m.Check(KeyWindows(k, []Window{{Limit: 0, Size: 10 * sec}}), "z", 1, t0.Add(sec)); got.Allowed || got.RetryAfter != 10*sec {
			t.Fatalf("limit 0: got %+v, want refused for the window's size", got)
		}
	})
}

// checkBatch decides members one after the other at the same instant, each
// paying 1.
func checkBatch(m *Model, ws []KeyWindow, members []string, now time.Time) []StoreResult {
	out := make([]StoreResult, len(members))
	for i, member := range members {
		out[i] = m.Check(ws, member, 1, now)
	}
	return out
}

// TestModelAmountAndCalendarExamples: amount caps, calendar periods and
// give-back on hand-worked cases.
func TestModelAmountAndCalendarExamples(t *testing.T) {
	k := Key{BizType: "A", Channel: "B"}
	sh, err := time.LoadLocation("Asia/Shanghai")
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 23, 20, 0, 0, 0, sh)
	t.Run("a small payment passes after a large one was refused", func(t *testing.T) {
		m := NewModel()
		ws := KeyWindows(k, []Window{{Limit: 10, Size: time.Minute, Amount: true}})
		if got := m.Check(ws, "a", 7, t0); !got.Allowed || got.Count != 7 {
			t.Fatalf("a (7 of 10): got %+v, want admitted, use 7", got)
		}
		// 7 + 5 > 10: refused until a leaves, a minute after t0.
		if got := m.Check(ws, "b", 5, t0.Add(10*time.Second)); got.Allowed || got.RetryAfter != 50*time.Second {
			t.Fatalf("b (5): got %+v, want refused for 50s", got)
		}
		if got := m.Check(ws, "c", 3, t0.Add(10*time.Second)); !got.Allowed || got.Count != 10 {
			t.Fatalf("c (3): got %+v, want admitted, use 10", got)
		}
		// More than the cap never fits: the window's size.
		if got := m.Check(ws, "d", 11, t0.Add(20*time.Second)); got.Allowed || got.RetryAfter != time.Minute {
			t.Fatalf("d (11 > cap): got %+v, want refused for the window's size", got)
		}
		// A decline gives a's amount back.
		m.Release(ws, "a")
		if got := m.Usage(ws, t0.Add(20*time.Second)); got[0] != 3 {
			t.Fatalf("use after giving a back = %d, want 3", got[0])
		}
	})
	t.Run("a retried payment is not counted twice", func(t *testing.T) {
		m := NewModel()
		ws := KeyWindows(k, []Window{{Limit: 10, Amount: true, Calendar: Calendar{Unit: CalendarDay, Zone: sh}}})
		m.Check(ws, "a", 6, t0)
		if got := m.Check(ws, "a", 6, t0.Add(time.Hour)); !got.Allowed || !got.Duplicate || got.Count != 6 {
			t.Fatalf("retry of a: got %+v, want a duplicate, use 6", got)
		}
	})
	t.Run("a calendar day resets at the cutoff", func(t *testing.T) {
		m := NewModel()
		day := Calendar{Unit: CalendarDay, Zone: sh, Cutoff: 23 * time.Hour}
		ws := KeyWindows(k, []Window{{Limit: 2, Calendar: day}})
		m.Check(ws, "a", 1, t0)
		m.Check(ws, "b", 1, t0)
		// 20:00 -> the day ends at 23:00: three hours.
		if got := m.Check(ws, "c", 1, t0.Add(time.Hour)); got.Allowed || got.RetryAfter != 2*time.Hour {
			t.Fatalf("c at 21:00: got %+v, want refused until 23:00 (2h)", got)
		}
		if got := m.Check(ws, "c", 1, t0.Add(3*time.Hour)); !got.Allowed || got.Count != 1 {
			t.Fatalf("c at 23:00: got %+v, want admitted in a new day, use 1", got)
		}
	})
	t.Run("own and channel-wide windows together", func(t *testing.T) {
		m := NewModel()
		own := KeyWindows(k, []Window{{Limit: 5, Size: time.Second}})
		wide := KeyWindows(ChannelWide("B"), []Window{{Limit: 1, Size: time.Second}})
		ws := append(own, wide...)
		m.Check(KeyWindows(Key{"OTHER", "B"}, []Window{{Limit: 5, Size: time.Second}}), "x", 1, t0)
		m.Check(append(KeyWindows(Key{"OTHER", "B"}, []Window{{Limit: 5, Size: time.Second}}), wide...), "x2", 1, t0)
		got := m.Check(ws, "a", 1, t0)
		if got.Allowed || got.Window != 1 {
			t.Fatalf("a: got %+v, want refused by the channel-wide window (index 1)", got)
		}
		if u := m.Usage(own, t0); u[0] != 0 {
			t.Fatalf("own window use %d after a refusal, want 0 (nothing recorded)", u[0])
		}
	})
}
