package breaker

import (
	"fmt"
	"testing"
	"time"
)

// clock is a fake clock the test moves.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// TestBreakerLife walks a breaker through its states on a fake clock: it
// opens on the Failures-th failure in a row, refuses for the cool-down,
// lets Probes calls through at once, closes after Probes successes in a
// row, reopens on a probe's failure, frees an abandoned probe, and reports
// each change once.
func TestBreakerLife(t *testing.T) {
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	var changes []string
	b := New(Options{Failures: 3, Cooldown: time.Second, Probes: 2, Now: c.now,
		OnChange: func(from, to State) { changes = append(changes, fmt.Sprintf("%s>%s", from, to)) }})
	must := func(what string, got, want any) {
		t.Helper()
		if got != want {
			t.Fatalf("%s: %v, want %v", what, got, want)
		}
	}
	must("closed allows", b.Allow(), true)
	must("1st failure opens", b.Failure(), false)
	must("a success resets the run", b.Success(), false)
	b.Failure()
	b.Failure()
	must("3rd failure in a row opens", b.Failure(), true)
	must("state", b.State(), Open)
	must("open refuses", b.Allow(), false)
	must("refuses", b.Refuses(), true)
	must("retry after", b.RetryAfter(), time.Second)
	c.t = c.t.Add(400 * time.Millisecond)
	must("retry after, later", b.RetryAfter(), 600*time.Millisecond)
	must("failure while open starts another cool-down, opens nothing new", b.Failure(), false)
	c.t = c.t.Add(999 * time.Millisecond)
	must("still cooling down", b.Allow(), false)
	c.t = c.t.Add(time.Millisecond)
	must("state after the cool-down", b.State(), HalfOpen)
	must("1st probe", b.Allow(), true)
	must("2nd probe", b.Allow(), true)
	must("3rd call while 2 probes are out", b.Allow(), false)
	must("refuses with every probe out", b.Refuses(), true)
	must("retry after with every probe out", b.RetryAfter(), time.Millisecond)
	b.Abandon()
	must("an abandoned probe frees its place", b.Allow(), true)
	must("1st probe's success does not close yet", b.Success(), false)
	must("a probe's failure reopens", b.Failure(), false)
	must("state after a probe failed", b.State(), Open)
	c.t = c.t.Add(time.Second)
	must("probe", b.Allow(), true)
	must("probe", b.Allow(), true)
	must("1st success", b.Success(), false)
	must("2nd success in a row closes", b.Success(), true)
	must("state", b.State(), Closed)
	must("is open", b.IsOpen(), false)
	must("retry after closed", b.RetryAfter(), time.Duration(0))
	want := "[closed>open open>half-open half-open>open open>half-open half-open>closed]"
	must("changes", fmt.Sprint(changes), want)
}

// TestSuccessWhileOpenCloses: a call let through before the breaker
// opened that then succeeds closes it: what it guards answered.
func TestSuccessWhileOpenCloses(t *testing.T) {
	c := &clock{t: time.Unix(0, 0)}
	b := New(Options{Failures: 1, Cooldown: time.Minute, Now: c.now})
	if !b.Allow() || !b.Failure() {
		t.Fatal("one failure must open a breaker of Failures 1")
	}
	if !b.Success() || b.IsOpen() || !b.Allow() {
		t.Fatalf("a success while open: state %s; want closed", b.State())
	}
}
