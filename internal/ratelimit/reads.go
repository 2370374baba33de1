package ratelimit

import (
	"context"
	"fmt"
	"sync"
)

// KeyUsage is what the store holds for one key, as UsageOf reads it.
type KeyUsage struct {
	// Rule is the key's rule in force when it was read.
	Rule Rule
	// Counts holds the use of each window of Rule, in its order: admissions,
	// or amount in minor units. It is nil for an unlimited rule and when Err
	// is set.
	Counts []int64
	// Err says why the use could not be read.
	Err error
}

// KeyLearned is a key's learned limits in force, as LearnedOf reads them.
type KeyLearned struct {
	// Limits are as Learned returns them; nil when none is in force.
	Limits []LearnedLimit
	Err    error
}

// keysPerRead is how many keys one store call of UsageOf or LearnedOf
// reads from an in-process store: the call holds the store's lock, which
// the admissions wait for, so it stays short (a fraction of a millisecond).
const keysPerRead = 512

// readParallelism is how many keys UsageOf and LearnedOf read at once from
// a shared store that reads key by key (not a KeysReader).
const readParallelism = 8

// keysPerPipeline is how many keys one read of a KeysReader carries.
const keysPerPipeline = 256

// readsAcrossKeys reports whether one call of store may carry the windows
// of many keys: the in-process stores do. The Redis store is read key by
// key, since a Redis Cluster keeps different keys on different nodes and
// one script call reaches one node.
func readsAcrossKeys(store Store) bool {
	switch store.(type) {
	case *LocalStore, *DurableStore:
		return true
	}
	return false
}

// UsageOf reads the use of each of keys, as Usage reads one key's, and
// returns one KeyUsage per key, in their order. The in-process stores are
// read keysPerRead keys per call; Redis in pipelines of keysPerPipeline
// keys (KeysReader); another shared store key by key, readParallelism
// keys at a time. A key whose read failed, or was not made before ctx
// ended, carries the error; the others are still read.
func (l *Limiter) UsageOf(ctx context.Context, keys []Key) []KeyUsage {
	out := make([]KeyUsage, len(keys))
	if kr, ok := l.store.(KeysReader); ok && !readsAcrossKeys(l.store) {
		cfg, now := l.Config(), l.opts.Now()
		groups := make([][]KeyWindow, len(keys))
		for i, k := range keys {
			out[i].Rule = cfg.RuleAt(k, now)
			groups[i] = KeyWindows(k, out[i].Rule.Windows)
		}
		counts, errs := pipelined(l, ctx, groups, kr.UsageOfKeys)
		for i := range out {
			out[i].Counts, out[i].Err = counts[i], errs[i]
		}
		return out
	}
	if !readsAcrossKeys(l.store) {
		eachParallel(ctx, len(keys), func(ctx context.Context, i int) {
			out[i].Rule, out[i].Counts, out[i].Err = l.Usage(ctx, keys[i])
		})
		return out
	}
	cfg, now := l.Config(), l.opts.Now()
	for i, k := range keys {
		out[i].Rule = cfg.RuleAt(k, now)
	}
	eachChunk(len(keys), func(start, end int) {
		var windows []KeyWindow
		for i := start; i < end; i++ {
			for _, w := range out[i].Rule.Windows {
				windows = append(windows, KeyWindow{Key: keys[i], Window: w})
			}
		}
		if len(windows) == 0 {
			return
		}
		var counts []int64
		err := l.readChunk(ctx, func(ctx context.Context) error {
			var err error
			if counts, err = l.store.Usage(ctx, windows); err == nil && len(counts) != len(windows) {
				err = fmt.Errorf("ratelimit: the store read %d windows, asked %d", len(counts), len(windows))
			}
			return err
		})
		at := 0
		for i := start; i < end; i++ {
			n := len(out[i].Rule.Windows)
			switch {
			case n == 0:
			case err != nil:
				out[i].Err = err
			default:
				out[i].Counts = counts[at : at+n : at+n]
			}
			at += n
		}
	})
	return out
}

// LearnedOf reads the learned limits in force of each of keys, as Learned
// reads one key's, and returns one KeyLearned per key, in their order; a
// key none of whose windows learns costs no store call. The stores are read
// as UsageOf reads them. Every key has none when the store is not a
// Learner.
func (l *Limiter) LearnedOf(ctx context.Context, keys []Key) []KeyLearned {
	out := make([]KeyLearned, len(keys))
	learner, ok := l.store.(Learner)
	if !ok {
		return out
	}
	if kr, ok := l.store.(KeysReader); ok && !readsAcrossKeys(l.store) {
		cfg, now := l.Config(), l.opts.Now()
		groups := make([][]KeyWindow, len(keys))
		for i, k := range keys {
			groups[i] = ownLearningWindows(k, cfg.RuleAt(k, now))
		}
		limits, errs := pipelined(l, ctx, groups, kr.LearnedOfKeys)
		for i := range out {
			out[i].Limits, out[i].Err = limits[i], errs[i]
		}
		return out
	}
	if !readsAcrossKeys(l.store) {
		eachParallel(ctx, len(keys), func(ctx context.Context, i int) {
			out[i].Limits, out[i].Err = l.Learned(ctx, keys[i])
		})
		return out
	}
	cfg, now := l.Config(), l.opts.Now()
	eachChunk(len(keys), func(start, end int) {
		var windows []KeyWindow
		owner := make([]int, 0, end-start) // the index in keys of each window's key
		for i := start; i < end; i++ {
			for _, kw := range ownLearningWindows(keys[i], cfg.RuleAt(keys[i], now)) {
				windows = append(windows, kw)
				owner = append(owner, i)
			}
		}
		if len(windows) == 0 {
			return
		}
		var limits []LearnedLimit
		err := l.readChunk(ctx, func(ctx context.Context) error {
			var err error
			limits, err = learner.Learned(ctx, windows)
			return err
		})
		if err != nil {
			for _, i := range owner {
				out[i].Err = err
			}
			return
		}
		// The store answers the windows in force only, in the order asked.
		next := 0
		for j, w := range windows {
			if next < len(limits) && limits[next].Key == w.Key && limits[next].Window == w.Window {
				out[owner[j]].Limits = append(out[owner[j]].Limits, limits[next])
				next++
			}
		}
	})
	return out
}

// pipelined reads groups, each one key's windows, through read,
// keysPerPipeline groups a call, and returns each group's answer and error
// in their order. An empty group is read as nothing (no answer, no error).
// A call that failed as a whole, or was not made before ctx ended, gives
// its error to each of its groups.
func pipelined[T any](l *Limiter, ctx context.Context, groups [][]KeyWindow, read func(context.Context, [][]KeyWindow) ([]T, []error)) ([]T, []error) {
	vals, errs := make([]T, len(groups)), make([]error, len(groups))
	var at []int // the index in groups of each group of the next call
	flush := func() {
		if len(at) == 0 {
			return
		}
		asked := make([][]KeyWindow, len(at))
		for j, i := range at {
			asked[j] = groups[i]
		}
		var got []T
		var gotErrs []error
		err := l.readChunk(ctx, func(ctx context.Context) error {
			got, gotErrs = read(ctx, asked)
			if len(got) != len(asked) || len(gotErrs) != len(asked) {
				return fmt.Errorf("ratelimit: the store answered %d reads, asked %d", len(got), len(asked))
			}
			return nil
		})
		for j, i := range at {
			if err != nil {
				errs[i] = err
			} else {
				vals[i], errs[i] = got[j], gotErrs[j]
			}
		}
		at = at[:0]
	}
	for i, g := range groups {
		if len(g) == 0 {
			continue
		}
		if at = append(at, i); len(at) == keysPerPipeline {
			flush()
		}
	}
	flush()
	return vals, errs
}

// readChunk makes one store read under the timeout of Usage's store call,
// or returns ctx's error without asking when ctx has ended.
func (l *Limiter) readChunk(ctx context.Context, read func(ctx context.Context) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, 10*l.opts.Timeout)
	defer cancel()
	return read(cctx)
}

// eachChunk calls read for [start, end) ranges of n items, keysPerRead
// long, in order.
func eachChunk(n int, read func(start, end int)) {
	for start := 0; start < n; start += keysPerRead {
		read(start, min(start+keysPerRead, n))
	}
}

// eachParallel calls read for every i in [0, n), readParallelism at a
// time, and returns once every call has.
func eachParallel(ctx context.Context, n int, read func(ctx context.Context, i int)) {
	sem := make(chan struct{}, readParallelism)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			read(ctx, i)
		}()
	}
	wg.Wait()
}
