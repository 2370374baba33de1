package emulator

import (
	"errors"
	"reflect"
	"testing"
	"time"
)

func TestParsePatch(t *testing.T) {
	ms := func(n int) *time.Duration { d := time.Duration(n) * time.Millisecond; return &d }
	f := func(x float64) *float64 { return &x }
	n := func(x int) *int { return &x }
	yes := true
	for _, tc := range []struct {
		in      string
		want    Behaviour
		wantErr string // the field named; "-" for a non-field error
	}{
		{in: `{}`, want: DefaultBehaviour()},
		{in: `{"latencyMs":25}`, want: with(func(b *Behaviour) { b.Latency = Latency{25 * time.Millisecond, 25 * time.Millisecond} })},
		{in: `{"latencyMs":{"min":0,"max":40}}`, want: with(func(b *Behaviour) { b.Latency = Latency{0, 40 * time.Millisecond} })},
		{in: `{"declineRate":0,"errorRate":1,"throttleCapacity":3,"throttleWindowMs":250,"notify":true}`, want: with(func(b *Behaviour) {
			b.ErrorRate, b.ThrottleCapacity, b.ThrottleWindow, b.Notify = 1, 3, 250*time.Millisecond, true
		})},
		{in: `{"notifyRetriesMs":[50,100],"closeAfterMs":300000,"closeTooSoonCode":"ORDER_TOO_RECENT"}`, want: with(func(b *Behaviour) {
			b.NotifyRetries, b.CloseAfter, b.CloseTooSoonCode = []time.Duration{50 * time.Millisecond, 100 * time.Millisecond}, 5*time.Minute, "ORDER_TOO_RECENT"
		})},
		{in: `{"notifyRetriesMs":[]}`, want: with(func(b *Behaviour) { b.NotifyRetries = []time.Duration{} })},
		{in: `{"notifyRetriesMs":[0]}`, wantErr: "notifyRetriesMs"},
		{in: `{"notifyRetriesMs":50}`, wantErr: "notifyRetriesMs"},
		{in: `{"closeTooSoonCode":"too soon"}`, wantErr: "closeTooSoonCode"},
		{in: `{"declineRate":1.01}`, wantErr: "declineRate"},
		{in: `{"processingMs":-5}`, wantErr: "processingMs"},
		{in: `{"holdMs":3600001}`, wantErr: "holdMs"},
		{in: `{"notifyReorder":1}`, wantErr: "notifyReorder"},
		{in: `{"latencyMs":{"min":1,"max":2,"mean":1}}`, wantErr: "latencyMs"},
		{in: `{"lateness":1}`, wantErr: "lateness"},
		{in: `{"zeta":1,"alpha":1}`, wantErr: "alpha"}, // the first in alphabetical order
		{in: `null`, wantErr: "-"},
		{in: `"x"`, wantErr: "-"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			p, err := ParsePatch([]byte(tc.in))
			if tc.wantErr != "" {
				var fe *FieldError
				switch {
				case err == nil:
					t.Fatalf("took it: %+v", p)
				case tc.wantErr == "-" && errors.As(err, &fe):
					t.Fatalf("got field error %v, want a plain one", err)
				case tc.wantErr != "-" && (!errors.As(err, &fe) || fe.Field != tc.wantErr):
					t.Fatalf("got %v, want an error naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := DefaultBehaviour().With(p)
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v (%v), want %+v", got, err, tc.want)
			}
		})
	}
	// With checks a Patch built in Go too.
	for name, p := range map[string]Patch{
		"declineRate":      {DeclineRate: f(2)},
		"holdMs":           {Hold: ms(-1)},
		"throttleWindowMs": {ThrottleWindow: ms(0)},
		"throttleCapacity": {ThrottleCapacity: n(-1)},
		"notifyDuplicates": {NotifyDuplicates: n(101)},
		"latencyMs":        {Latency: &Latency{Min: 2, Max: 1}},
	} {
		var fe *FieldError
		if _, err := DefaultBehaviour().With(p); !errors.As(err, &fe) || fe.Field != name {
			t.Errorf("With(%s): %v, want an error naming it", name, err)
		}
	}
	if b, err := DefaultBehaviour().With(Patch{NotifyReorder: &yes}); err != nil || !b.NotifyReorder {
		t.Errorf("With(notifyReorder): %+v %v", b, err)
	}
}

func with(change func(*Behaviour)) Behaviour {
	b := DefaultBehaviour()
	change(&b)
	return b
}

func TestLatencyDraw(t *testing.T) {
	l := Latency{Min: 10 * time.Millisecond, Max: 20 * time.Millisecond}
	for _, u := range []float64{0, 0.25, 0.5, 0.999999999} {
		if d := l.draw(u); d < l.Min || d > l.Max {
			t.Errorf("draw(%v) = %v outside [%v, %v]", u, d, l.Min, l.Max)
		}
	}
	if d := (Latency{Min: 5, Max: 5}).draw(0.7); d != 5 {
		t.Errorf("a fixed latency drew %v", d)
	}
}
