package ratelimit

import (
	"fmt"
	"testing"
	"time"
)

// learningWindow is a sliding count window of limit c per second with the
// default learning setting.
func learningWindow(c int64) KeyWindow {
	w := Window{Limit: c, Size: time.Second}
	return KeyWindow{Key: Key{BizType: "PAY", Channel: "LEARN"}, Window: w, Learn: Adaptive{}.learning(w)}
}

func TestAdaptiveDefaults(t *testing.T) {
	for _, tc := range []struct {
		w    Window
		a    Adaptive
		want Learning
	}{
		{Window{Limit: 100, Size: time.Second}, Adaptive{}, Learning{Step: 5, Decrease: 700_000, Floor: 1}},
		{Window{Limit: 1000, Size: time.Minute}, Adaptive{}, Learning{Step: 50, Decrease: 700_000, Floor: 10}},
		{Window{Limit: 10, Size: time.Second}, Adaptive{}, Learning{Step: 1, Decrease: 700_000, Floor: 1}}, // 5% of 10 is 0: at least 1
		{Window{Limit: 100, Size: time.Second}, Adaptive{Decrease: 500_000, Increase: 200_000, Floor: 7}, Learning{Step: 20, Decrease: 500_000, Floor: 7}},
		{Window{Limit: 100, Size: time.Second}, Adaptive{Off: true}, Learning{}},
		{Window{Limit: 100, Size: time.Second, Amount: true}, Adaptive{}, Learning{}},
		{Window{Limit: 100, Calendar: Calendar{Unit: CalendarDay, Zone: time.UTC}}, Adaptive{}, Learning{}},
		{Window{Limit: 0, Size: time.Second}, Adaptive{}, Learning{}},
	} {
		t.Run(fmt.Sprintf("%s %+v", tc.w.Name(), tc.a), func(t *testing.T) {
			if got := tc.a.learning(tc.w); got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
	if f, err := Millionths(0.7); err != nil || f != 700_000 {
		t.Fatalf("Millionths(0.7) = %d, %v; want 700000", f, err)
	}
	for _, bad := range []Adaptive{{Decrease: million}, {Decrease: -1}, {Increase: million + 1}, {Floor: -1}} {
		if bad.Validate() == nil {
			t.Errorf("Validate(%+v) = nil, want an error", bad)
		}
	}
}

// TestModelLearnedLimit walks the rule through one story: a full window,
// a throttle to 0.7× what it admitted, the retry-after of a refusal by the
// learned limit, the climb by 5% of the limit per whole window, a storm of
// throttles that does not compound, the floor, the channel's retry-after
// as a not-before, and the end of the learned limit.
func TestModelLearnedLimit(t *testing.T) {
	m := NewModel()
	w := learningWindow(100)
	ws := []KeyWindow{w}
	t0 := time.Unix(1_700_000_000, 0)
	at := func(ms int64) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	admit := func(n int, now time.Time) int {
		ok := 0
		for i := 0; i < n; i++ {
			if m.Check(ws, fmt.Sprintf("m%d-%d", now.UnixMicro(), i), 0, now).Allowed {
				ok++
			}
		}
		return ok
	}
	learned := func(now time.Time) LearnedLimit {
		t.Helper()
		got := m.Learned(ws, now)
		if len(got) != 1 {
			t.Fatalf("at %v: learned %+v, want one", now.Sub(t0), got)
		}
		return got[0]
	}

	if got := admit(120, at(0)); got != 100 {
		t.Fatalf("admitted %d, want the configured 100", got)
	}
	m.Throttle(ws, at(500), 0) // use 100: learned 70, climbing to 100 in 6 windows
	if l := learned(at(500)); l.Limit != 70 || l.Learned != 70 || !l.Until.Equal(at(6500)) || !l.NotBefore.IsZero() {
		t.Fatalf("after the throttle: %+v, want limit 70 until +6.5s", l)
	}
	res := m.Check(ws, "x", 0, at(600))
	if res.Allowed || res.RetryAfter != 400*time.Millisecond || res.Limits[0] != 70 {
		// 100 held, 70 allowed: the 31st oldest must leave, at 1 s.
		t.Fatalf("refusal by the learned limit: %+v, want retry-after 400ms and limit 70", res)
	}
	if got := admit(80, at(1000)); got != 70 {
		t.Fatalf("next window admitted %d, want the learned 70", got)
	}
	if got := admit(10, at(1500)); got != 5 {
		t.Fatalf("one whole window after the throttle admitted %d more, want the step 5", got)
	}
	for i := 0; i < 300; i++ {
		m.Throttle(ws, at(1600), 0)
	}
	// 75 in the window: 0.7 × 75 = 52, once, however many throttles.
	if l := learned(at(1600)); l.Limit != 52 {
		t.Fatalf("after a storm of 300 throttles: %+v, want 52 (0.7 × 75, not compounded)", l)
	}
	m.Throttle(ws, at(5000), 0) // the window is empty: the floor
	if l := learned(at(5000)); l.Limit != 1 {
		t.Fatalf("throttled on an empty window: %+v, want the floor 1", l)
	}
	m.Throttle(ws, at(5000), 2*time.Second)
	res = m.Check(ws, "y", 0, at(6000))
	if res.Allowed || res.RetryAfter != time.Second || res.Limits[0] != 0 {
		t.Fatalf("before the channel's retry-after: %+v, want refused for 1s with limit 0", res)
	}
	if !m.Check(ws, "y", 0, at(7000)).Allowed {
		t.Fatalf("refused at the channel's retry-after")
	}
	// From 1 at +5s, +5 per second: 100 reached after 20 windows (⌈99/5⌉).
	if l := learned(at(24_999)); l.Limit != 96 {
		t.Fatalf("just before the end: %+v, want 96", l)
	}
	if got := m.Learned(ws, at(25_000)); len(got) != 0 {
		t.Fatalf("back at the configured limit: %+v, want none", got)
	}
	if res := m.Check(ws, "z", 0, at(25_000)); res.Limits != nil {
		t.Fatalf("a check after the end reports limits %v, want none", res.Limits)
	}
}

// TestModelLearnedLimitAcrossLimitsChange: a learned limit applies as
// min(configured, learned) to the configured limit in force, and ends when
// it would have reached the limit in force at the throttle.
func TestModelLearnedLimitAcrossLimitsChange(t *testing.T) {
	m := NewModel()
	w := learningWindow(10)
	t0 := time.Unix(1_700_000_000, 0)
	for i := 0; i < 10; i++ {
		m.Check([]KeyWindow{w}, fmt.Sprint(i), 0, t0)
	}
	m.Throttle([]KeyWindow{w}, t0, 0) // 7, +1 per second, ends at +3s
	lower := learningWindow(5)
	higher := learningWindow(50)
	t1 := t0.Add(1500 * time.Millisecond)
	if got := m.Learned([]KeyWindow{lower}, t1); got[0].Limit != 5 {
		t.Fatalf("limit lowered to 5: %+v, want 5 in force", got)
	}
	// Raised to 50 the value climbs by the new step (2) from 7.
	if got := m.Learned([]KeyWindow{higher}, t1); got[0].Limit != 9 {
		t.Fatalf("limit raised to 50: %+v, want 9", got)
	}
	if got := m.Learned([]KeyWindow{higher}, t0.Add(3*time.Second)); len(got) != 0 {
		t.Fatalf("at the end computed under the old limit: %+v, want none", got)
	}
}
