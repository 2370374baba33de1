package main

import (
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"payserver/bench/internal/redisinfo"
	"payserver/internal/ratelimit"
)

// series is one measured run of checks through a Limiter.
type series struct {
	lim     *ratelimit.Limiter
	n       int
	callers int
	// req returns the i-th check.
	req func(i int) ratelimit.Request
	// admit is what every check must be: admitted (true) or refused.
	admit bool
	// chunk, for admitted checks, releases them after every chunk checks,
	// unmeasured, so that the window holds at most chunk members more than
	// it did at the start; 0 never releases.
	chunk int
}

// point is what a series measured.
type point struct {
	p50, p99 time.Duration
	// redisUs is the script commands' time per check (INFO commandstats).
	redisUs float64
	// perCall is the checks per script call.
	perCall float64
}

// measure runs s. Every check must be decided by Redis the way s says: an
// error, a decision by anything else, or the other outcome fails the run.
func (b *bench) measure(s series) (point, error) {
	lat := make([]time.Duration, s.n)
	chunk := s.chunk
	if chunk <= 0 || !s.admit {
		chunk = s.n
	}
	var script redisinfo.CmdStat
	for from := 0; from < s.n; from += chunk {
		to := min(from+chunk, s.n)
		before, err := redisinfo.CommandStats(b.ctx, b.client)
		if err != nil {
			return point{}, err
		}
		holds, err := s.checks(b, from, to, lat)
		if err != nil {
			return point{}, err
		}
		after, err := redisinfo.CommandStats(b.ctx, b.client)
		if err != nil {
			return point{}, err
		}
		a, z := redisinfo.Scripts(before), redisinfo.Scripts(after)
		script.Calls += z.Calls - a.Calls
		script.Usec += z.Usec - a.Usec
		if s.chunk > 0 && s.admit {
			if err := b.release(s.lim, holds); err != nil {
				return point{}, err
			}
		}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	p := point{p50: quantile(lat, 0.50), p99: quantile(lat, 0.99), redisUs: float64(script.Usec) / float64(s.n)}
	if script.Calls > 0 {
		p.perCall = float64(s.n) / float64(script.Calls)
	}
	return p, nil
}

// checks runs checks from..to-1 of s on s.callers goroutines, keeping each
// one's time in lat, and returns their holds.
func (s series) checks(b *bench, from, to int, lat []time.Duration) ([]ratelimit.Hold, error) {
	holds := make([]ratelimit.Hold, to-from)
	err := parallel(from, to, s.callers, func(i int) error {
		r := s.req(i)
		start := time.Now()
		d, err := s.lim.Check(b.ctx, r)
		lat[i] = time.Since(start)
		switch {
		case err != nil:
			return err
		case d.Source != ratelimit.SourceRedis:
			return fmt.Errorf("check %s %s: decided by %s, not Redis", r.Key, r.Member, d.Source)
		case d.Allowed != s.admit:
			return fmt.Errorf("check %s %s: allowed %v, want %v (window %s: %d of %d)", r.Key, r.Member, d.Allowed, s.admit, d.Rule, d.Count, d.Limit)
		}
		holds[i-from] = d.Hold
		return nil
	})
	return holds, err
}

// release gives back every hold, 16 at a time.
func (b *bench) release(lim *ratelimit.Limiter, holds []ratelimit.Hold) error {
	return parallel(0, len(holds), 16, func(i int) error { return lim.Release(b.ctx, holds[i]) })
}

// parallel runs fn(i) for every i in [from, to) on workers goroutines, each
// taking the next i, and returns the first error; after one, no worker
// takes another i.
func parallel(from, to, workers int, fn func(i int) error) error {
	var next atomic.Int64
	next.Store(int64(from))
	var failed atomic.Bool
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < to && !failed.Load(); i = int(next.Add(1) - 1) {
				if err := fn(i); err != nil {
					failed.Store(true)
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// quantile returns the q-th of sorted.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(float64(len(sorted))*q))]
}

// us formats a duration in microseconds.
func us(d time.Duration) string {
	return fmt.Sprintf("%.0f", float64(d)/float64(time.Microsecond))
}

// modes are the two ways checks reach the store.
type mode struct {
	name    string
	lim     *ratelimit.Limiter
	callers int
	// chunk is the most admitted members the window gains before they are
	// released, given the members it holds.
	chunk func(members int) int
}

func (b *bench) modes() []mode {
	return []mode{
		{"unbatched", b.unbatched, 1, func(m int) int { return max(1, m/10) }},
		// Enough checks per chunk for the callers to form batches.
		{fmt.Sprintf("coalesced, %d callers", b.o.callers), b.coalesced, b.o.callers, func(m int) int { return max(4*b.o.callers, m/10) }},
	}
}
