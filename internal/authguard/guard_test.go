package authguard

import (
	"fmt"
	"testing"
	"time"
)

// TestTenFailuresRefuseTheAddressUntilTheMinuteIsOver: the eleventh
// attempt within a minute of the first failure is refused until that
// minute is over; other addresses are not; the next minute starts afresh.
func TestTenFailuresRefuseTheAddressUntilTheMinuteIsOver(t *testing.T) {
	now := time.Date(2026, 11, 29, 4, 0, 0, 0, time.UTC)
	g := New(Options{Now: func() time.Time { return now }})
	for i := range MaxFailures {
		if wait := g.Blocked("10.0.0.7:4000"); wait != 0 {
			t.Fatalf("attempt %d refused (%v) before %d failures", i+1, wait, MaxFailures)
		}
		g.Failed("10.0.0.7:4000", "admin")
		now = now.Add(time.Second)
	}
	if wait := g.Blocked("10.0.0.7:5000"); wait != Window-MaxFailures*time.Second {
		t.Fatalf("after %d failures: refused for %v, want %v (the rest of the minute)", MaxFailures, wait, Window-MaxFailures*time.Second)
	}
	if wait := g.Blocked("10.0.0.8:4000"); wait != 0 {
		t.Fatalf("another address refused for %v", wait)
	}
	now = now.Add(Window - MaxFailures*time.Second)
	if wait := g.Blocked("10.0.0.7:4000"); wait != 0 {
		t.Fatalf("refused for %v after the minute", wait)
	}
}

// TestGuardIsBounded: past MaxAddresses addresses, a new one is still
// judged (never refused for want of room) and memory stays bounded.
func TestGuardIsBounded(t *testing.T) {
	now := time.Date(2026, 11, 29, 4, 0, 0, 0, time.UTC)
	g := New(Options{Now: func() time.Time { return now }})
	for i := range MaxAddresses + 10 {
		g.Failed(fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255), "client")
	}
	if n := g.tracked(); n > MaxAddresses {
		t.Fatalf("tracks %d addresses, want at most %d", n, MaxAddresses)
	}
}
