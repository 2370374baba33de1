package ratelimit_test

import (
	"errors"
	"testing"
	"time"

	"payserver/internal/ratelimit"
)

type recordingObserver struct{ events []string }

func (r *recordingObserver) Decided(d ratelimit.Decision, _ time.Duration) {
	r.events = append(r.events, "decided "+d.Key.String())
}
func (r *recordingObserver) Released(k ratelimit.Key) {
	r.events = append(r.events, "released "+k.String())
}
func (r *recordingObserver) StoreFailed(k ratelimit.Key, err error) {
	r.events = append(r.events, "failed "+k.String()+" "+err.Error())
}

func TestMultiObserver(t *testing.T) {
	k := ratelimit.Key{BizType: "B", Channel: "C"}
	a, b := &recordingObserver{}, &recordingObserver{}
	m := ratelimit.MultiObserver(a, nil, b)
	m.Decided(ratelimit.Decision{Key: k}, time.Millisecond)
	m.Released(k)
	m.StoreFailed(k, errors.New("boom"))
	want := []string{"decided B:C", "released B:C", "failed B:C boom"}
	for name, o := range map[string]*recordingObserver{"first": a, "second": b} {
		if len(o.events) != len(want) {
			t.Fatalf("%s observer got %v, want %v", name, o.events, want)
		}
		for i := range want {
			if o.events[i] != want[i] {
				t.Errorf("%s observer event %d: got %q, want %q", name, i, o.events[i], want[i])
			}
		}
	}
	t.Run("none left is a no-op", func(t *testing.T) {
		m := ratelimit.MultiObserver(nil, nil)
		m.Decided(ratelimit.Decision{Key: k}, 0) // must not panic
		m.Released(k)
		m.StoreFailed(k, errors.New("x"))
	})
	t.Run("one left is returned as is", func(t *testing.T) {
		if got := ratelimit.MultiObserver(nil, a); got != ratelimit.Observer(a) {
			t.Errorf("got %T, want the observer itself", got)
		}
	})
}
