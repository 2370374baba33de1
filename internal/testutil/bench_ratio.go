package testutil

import (
	"testing"
	"time"
)

// BenchRatio times oldFn and newFn in interleaved rounds of 1,000 calls
// each, for b.Loop, so that both see the same machine load, and reports
// "<newName>-ns/op", "<oldName>-ns/op" and their ratio "<newName>/<oldName>"
// (under 1: the new one is faster). It is the figure to quote from a
// shared machine, where two separate benchmark lines may see different
// loads.
func BenchRatio(b *testing.B, oldName string, oldFn func(), newName string, newFn func()) {
	b.Helper()
	const round = 1000
	var before, now time.Duration
	calls := 0
	for b.Loop() {
		t0 := time.Now()
		for range round {
			oldFn()
		}
		t1 := time.Now()
		for range round {
			newFn()
		}
		now += time.Since(t1)
		before += t1.Sub(t0)
		calls += round
	}
	b.ReportMetric(float64(now.Nanoseconds())/float64(calls), newName+"-ns/op")
	b.ReportMetric(float64(before.Nanoseconds())/float64(calls), oldName+"-ns/op")
	b.ReportMetric(float64(now)/float64(before), newName+"/"+oldName)
}
