package testutil

import (
	"testing"
	"time"
)

// BenchRatio times oldFn and newFn in interleaved rounds of 1,000 calls
// each, for b.Loop, so that both see the same machine load (which one goes
// first alternates, so that neither is charged for the garbage the other
// left), and reports
// "<newName>-ns/op", "<oldName>-ns/op" and their ratio "<newName>/<oldName>"
// (under 1: the new one is faster). It is the figure to quote from a
// shared machine, where two separate benchmark lines may see different
// loads.
func BenchRatio(b *testing.B, oldName string, oldFn func(), newName string, newFn func()) {
	b.Helper()
	const round = 1000
	var before, now time.Duration
	calls := 0
	timed := func(fn func()) time.Duration {
		t0 := time.Now()
		for range round {
			fn()
		}
		return time.Since(t0)
	}
	for b.Loop() {
		if calls/round%2 == 0 {
			before += timed(oldFn)
			now += timed(newFn)
		} else {
			now += timed(newFn)
			before += timed(oldFn)
		}
		calls += round
	}
	b.ReportMetric(float64(now.Nanoseconds())/float64(calls), newName+"-ns/op")
	b.ReportMetric(float64(before.Nanoseconds())/float64(calls), oldName+"-ns/op")
	b.ReportMetric(float64(now)/float64(before), newName+"/"+oldName)
}
