package testutil

import (
	"runtime"
	"sync/atomic"
	"time"
)

// PeakHeap collects garbage, runs f, and returns the live heap's level
// before f (HeapAlloc after the collection) and the most it reached while
// f ran, sampled every interval: what a benchmark reports as the memory an
// operation holds.
func PeakHeap(every time.Duration, f func()) (base, peak uint64) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base = ms.HeapAlloc
	var top atomic.Uint64
	top.Store(base)
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var s runtime.MemStats
		for {
			runtime.ReadMemStats(&s)
			if s.HeapAlloc > top.Load() {
				top.Store(s.HeapAlloc)
			}
			select {
			case <-stop:
				return
			case <-time.After(every):
			}
		}
	}()
	f()
	close(stop)
	<-sampled
	return base, top.Load()
}
