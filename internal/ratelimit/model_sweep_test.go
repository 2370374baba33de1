package ratelimit

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// TestTheModelKeepsNoWindowOfAMerchantPast: merchant IDs come from
// clients, and each one names windows of its own. A model that checks
// 50,000 merchants in turn, each once, keeps about as many windows as
// still hold a member, not one per merchant ever seen.
func TestTheModelKeepsNoWindowOfAMerchantPast(t *testing.T) {
	k := Key{BizType: "PAY", Channel: "ALIPAY"}
	per := &Merchants{PerMerchant: 1}
	count := Window{Limit: 1_000_000, Size: time.Second}
	day := Window{Limit: 1_000_000, Calendar: Calendar{Unit: CalendarDay, Zone: time.UTC}}
	m := NewModel()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	const merchants = 50_000
	for i := range merchants {
		merchant := fmt.Sprintf("M%06d", i)
		windows := []KeyWindow{
			{Key: k, Window: count}, merchantWindow(k, count, per, merchant),
			{Key: k, Window: day}, merchantWindow(k, day, per, merchant),
		}
		if r := m.Check(windows, fmt.Sprintf("r%d", i), 1, now); !r.Allowed {
			t.Fatalf("check %d refused: %+v", i, r)
		}
		now = now.Add(10 * time.Millisecond)
	}
	// A day window's merchants hold their members all day: their periods
	// stay. The sliding windows held by a member are those of the last
	// second and a half (the slack included): about 150 merchants.
	if n := len(m.sliding); n > 2*minSweep {
		t.Errorf("the model keeps %d sliding windows after %d merchants, each in them for a second", n, merchants)
	}
	if n := len(m.periods); n != merchants+1 {
		t.Errorf("the model keeps %d calendar periods, want %d: the day's merchants and the window", n, merchants+1)
	}
	// The next day, as many merchants again: once the periods have doubled
	// they are swept, and none of the past day's is left.
	now = now.Add(24 * time.Hour)
	for i := range merchants + 1 {
		merchant := fmt.Sprintf("N%06d", i)
		m.Check([]KeyWindow{{Key: k, Window: day}, merchantWindow(k, day, per, merchant)}, fmt.Sprintf("n%d", i), 1, now)
		now = now.Add(10 * time.Millisecond)
	}
	past := 0
	for _, p := range m.periods {
		if p.end <= micros(now)-sweepSlack.Microseconds() {
			past++
		}
	}
	if past > 0 {
		t.Errorf("the model keeps %d calendar periods of a past day among %d", past, len(m.periods))
	}
}

// TestTheFallbackKeepsNoCopyOfAMerchantPast: while Redis answers, the
// fallback copies each admission into the windows it names, a merchant's
// own among them, and keeps each amount window's use: those copies leave
// with their members too.
func TestTheFallbackKeepsNoCopyOfAMerchantPast(t *testing.T) {
	k := Key{BizType: "PAY", Channel: "ALIPAY"}
	per := &Merchants{PerMerchant: 1}
	count := Window{Limit: 1_000_000, Size: time.Second}
	money := Window{Limit: 1_000_000, Size: time.Second, Amount: true}
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	s := newFallback(func() time.Time { return now })
	const merchants = 50_000
	for i := range merchants {
		merchant := fmt.Sprintf("M%06d", i)
		windows := []KeyWindow{{Key: k, Window: count}, merchantWindow(k, count, per, merchant), merchantWindow(k, money, per, merchant)}
		s.followRedis(windows, 1, fmt.Sprintf("r%d", i), 1, true, []int64{1, 1, 1}, now)
		now = now.Add(10 * time.Millisecond)
	}
	if n := len(s.model.sliding); n > 2*minSweep {
		t.Errorf("the fallback keeps %d sliding windows after %d merchants, each in them for a second", n, merchants)
	}
	if n := len(s.seen); n > 2*minSweep {
		t.Errorf("the fallback keeps the use of %d amount windows after %d merchants, each in them for a second", n, merchants)
	}
}

// TestAskingWhetherAWindowHoldsAMemberMakesNoWindow: in an outage, one
// admitted requestId retried under ever new merchant IDs is a duplicate
// each time. The fallback asks its windows whether they hold it, and an
// answer about a window it does not hold makes none.
func TestAskingWhetherAWindowHoldsAMemberMakesNoWindow(t *testing.T) {
	k := Key{BizType: "PAY", Channel: "ALIPAY"}
	per := &Merchants{PerMerchant: 5}
	count := Window{Limit: 1_000_000, Size: time.Second}
	day := Window{Limit: 1_000_000, Calendar: Calendar{Unit: CalendarDay, Zone: time.UTC}}
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	s := newFallback(func() time.Time { return now })
	windows := func(m string) []KeyWindow {
		return []KeyWindow{{Key: k, Window: count}, merchantWindow(k, count, per, m), {Key: k, Window: day}, merchantWindow(k, day, per, m)}
	}
	if r, local := s.CheckLocalOnly(windows("A"), "r1", 1, now); !r.Allowed || !local {
		t.Fatalf("first admission: %+v, decided in process %v", r, local)
	}
	const retries = 10_000
	for i := range retries {
		now = now.Add(5 * time.Microsecond)
		if r, _ := s.CheckLocalOnly(windows(fmt.Sprintf("N%06d", i)), "r1", 1, now); !r.Allowed || !r.Duplicate {
			t.Fatalf("retry %d: %+v, want a duplicate", i, r)
		}
	}
	if n := len(s.localOnly.sliding) + len(s.localOnly.periods); n > 4 {
		t.Errorf("the in-process admissions hold %d windows after %d retries under new merchants, want the first admission's 4", n, retries)
	}
}

// TestTheWindowsOfABurstLeaveWithoutNewOnes: the windows of a burst of
// merchants leave soon after their members even when few new windows
// follow, and the map that held them is rebuilt to its new size (a Go map
// keeps the table of its largest size, and a sweep walks that table).
func TestTheWindowsOfABurstLeaveWithoutNewOnes(t *testing.T) {
	k := Key{BizType: "PAY", Channel: "ALIPAY"}
	per := &Merchants{PerMerchant: 1}
	count := Window{Limit: 1 << 40, Size: time.Second}
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	check := func(m *Model, merchant string) {
		if r := m.Check([]KeyWindow{merchantWindow(k, count, per, merchant)}, merchant, 1, now); !r.Allowed {
			t.Fatalf("%s refused: %+v", merchant, r)
		}
	}
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	base := heap()
	m := NewModel()
	const burst = 100_000
	for i := range burst {
		check(m, fmt.Sprintf("B%07d", i))
		now = now.Add(time.Microsecond)
	}
	peak := heap() - base
	// An hour later, a trickle: 100 new merchants a second for two minutes.
	now = now.Add(time.Hour)
	for i := range 12_000 {
		check(m, fmt.Sprintf("T%07d", i))
		now = now.Add(10 * time.Millisecond)
	}
	if n := len(m.sliding); n > 2*minSweep {
		t.Errorf("%d sliding windows two minutes into a trickle of 100 merchants a second, an hour after a burst of %d", n, burst)
	}
	if left := heap() - base; left > peak/10 {
		t.Errorf("the model holds %d KB after the burst's windows left, %d KB at the burst: its map kept the burst's table", left>>10, peak>>10)
	}
	runtime.KeepAlive(m)
}
