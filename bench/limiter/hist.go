package main

import (
	"math/bits"
	"time"
)

// hist is a log-linear latency histogram in nanoseconds: values below 64 ns
// are exact, above that each power of two is split into 32 buckets, so a
// reported quantile is within about 3% of the true one. One per goroutine,
// merged at the end, so recording takes no lock and allocates nothing.
type hist struct {
	n      uint64
	counts [64 * histSub]uint64
}

const histSub = 32

func histIndex(v uint64) int {
	if v < 2*histSub {
		return int(v)
	}
	e := bits.Len64(v) - 6 // v >= 64 gives e >= 1
	m := v >> uint(e)      // in [32, 64)
	i := e*histSub + int(m)
	if i >= len(hist{}.counts) {
		i = len(hist{}.counts) - 1
	}
	return i
}

// histLower is the smallest value that falls in bucket i.
func histLower(i int) uint64 {
	if i < 2*histSub {
		return uint64(i)
	}
	e := i/histSub - 1
	m := uint64(i%histSub + histSub)
	return m << uint(e)
}

func (h *hist) record(d time.Duration) {
	if d < 0 {
		d = 0
	}
	h.counts[histIndex(uint64(d))]++
	h.n++
}

func (h *hist) merge(o *hist) {
	h.n += o.n
	for i, c := range o.counts {
		h.counts[i] += c
	}
}

// quantile returns the midpoint of the bucket holding the q-th value.
func (h *hist) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	target := uint64(q * float64(h.n))
	if target < 1 {
		target = 1
	}
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= target {
			lo := histLower(i)
			hi := histLower(i + 1)
			return time.Duration((lo + hi) / 2)
		}
	}
	return time.Duration(histLower(len(h.counts) - 1))
}
