package stats

import (
	"context"
	"errors"
	"log/slog"
	"sort"
	"sync"
	"time"

	"payserver/internal/ratelimit"
)

// Defaults of ForecasterOptions.
const (
	DefaultForecastInterval = 30 * time.Second
	DefaultForecastLookback = 15 * time.Minute
)

// QuotaSource reads the rules in force and what their windows hold, from
// the limiter's shared store, for many keys at once (in batches of keys on
// the in-process stores, several keys at a time on Redis).
// *ratelimit.Limiter implements it.
type QuotaSource interface {
	Config() *ratelimit.Config
	UsageOf(ctx context.Context, keys []ratelimit.Key) []ratelimit.KeyUsage
}

// ForecasterOptions configures a Forecaster. Source is required; the zero
// value of every other field selects the documented default.
type ForecasterOptions struct {
	Source QuotaSource
	// Interval is how often Run reads the calendar windows' use. Default
	// DefaultForecastInterval.
	Interval time.Duration
	// Lookback is the span the current rate is measured over. Default
	// DefaultForecastLookback.
	Lookback time.Duration
	// Now is the clock. Default time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// Forecast is one calendar window of one key (its use now, and when it
// runs out at the current rate).
type Forecast struct {
	Key    ratelimit.Key
	Window ratelimit.Window
	// Limit is the window's cap (admissions, or amount in minor units).
	Limit int64
	// Used is what the window holds now.
	Used int64
	// PeriodStart and PeriodEnd bound the current calendar period.
	PeriodStart, PeriodEnd time.Time
	// Rate is the use added per second lately: over the lookback once two
	// reads of this period span a minute of it, else the average since the
	// period started.
	Rate float64
	// ExhaustsAt is when the window runs out at Rate (At itself when it
	// already has), or zero when it lasts until PeriodEnd.
	ExhaustsAt time.Time
	// At is when Used was read.
	At time.Time
}

// Utilization is Used / Limit; 1 for a window of limit 0.
func (f Forecast) Utilization() float64 {
	if f.Limit <= 0 {
		return 1
	}
	return float64(f.Used) / float64(f.Limit)
}

// sample is one read of a window's use.
type sample struct {
	at   time.Time
	used int64
}

// series is the recent reads of one window, all in one period.
type series struct {
	periodStart time.Time
	samples     []sample
}

// seriesID names a window of a key across reads.
type seriesID struct {
	key ratelimit.Key
	id  string
}

// Forecaster reads the use of every calendar window in force every
// Interval and forecasts, from the rate over Lookback, when each runs out
// ("at this rate ALIPAY's daily amount runs out at 21:40"). The use is the
// shared store's, so every instance forecasts for the whole fleet. It is
// safe for concurrent use.
type Forecaster struct {
	opts ForecasterOptions
	log  *slog.Logger

	mu        sync.Mutex
	series    map[seriesID]*series
	forecasts []Forecast
}

// NewForecaster returns a Forecaster; call Run to read periodically.
func NewForecaster(opts ForecasterOptions) (*Forecaster, error) {
	if opts.Source == nil {
		return nil, errors.New("stats: nil quota source")
	}
	if opts.Interval <= 0 {
		opts.Interval = DefaultForecastInterval
	}
	if opts.Lookback <= 0 {
		opts.Lookback = DefaultForecastLookback
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Forecaster{opts: opts, log: opts.Logger, series: map[seriesID]*series{}}, nil
}

// Run reads at once, then every Interval, and within a second of a new
// limits snapshot, until ctx ends.
func (f *Forecaster) Run(ctx context.Context) {
	t := time.NewTicker(min(f.opts.Interval, time.Second))
	defer t.Stop()
	var cfg *ratelimit.Config
	var last time.Time
	for {
		if now := f.opts.Now(); cfg != f.opts.Source.Config() || now.Sub(last) >= f.opts.Interval {
			cfg, last = f.opts.Source.Config(), now
			f.Sample(ctx)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Forecasts returns the forecasts of the last read, sorted by key and
// window.
func (f *Forecaster) Forecasts() []Forecast {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Forecast(nil), f.forecasts...)
}

// Sample reads the use of every calendar window in force and updates the
// forecasts. A key whose use cannot be read keeps its last forecasts (their
// At says how old they are) until a read succeeds.
func (f *Forecaster) Sample(ctx context.Context) {
	cfg := f.opts.Source.Config()
	if cfg == nil {
		return
	}
	now := f.opts.Now()
	f.mu.Lock()
	last := map[ratelimit.Key][]Forecast{}
	for _, fc := range f.forecasts {
		last[fc.Key] = append(last[fc.Key], fc)
	}
	f.mu.Unlock()
	var out []Forecast
	seen := map[seriesID]bool{}
	keys := quotaKeys(cfg, now)
	reads := f.opts.Source.UsageOf(ctx, keys)
	for i, k := range keys {
		rule, counts, err := reads[i].Rule, reads[i].Counts, reads[i].Err
		if err == nil && len(counts) != len(rule.Windows) {
			err = errors.New("limiter store returned a count per window for another rule")
		}
		if err != nil {
			f.log.Warn("forecast: could not read the calendar windows' use; the last forecast stays", "key", k.String(), "err", err)
			for _, fc := range last[k] {
				seen[seriesID{k, fc.Window.ID()}] = true
				out = append(out, fc)
			}
			continue
		}
		at := f.opts.Now()
		for i, w := range rule.Windows {
			if !w.IsCalendar() {
				continue
			}
			id := seriesID{k, w.ID()}
			seen[id] = true
			out = append(out, f.observe(id, k, w, counts[i], at))
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Key != out[j].Key {
			return out[i].Key.String() < out[j].Key.String()
		}
		return out[i].Window.ID() < out[j].Window.ID()
	})
	f.mu.Lock()
	defer f.mu.Unlock()
	for id := range f.series {
		if !seen[id] {
			delete(f.series, id)
		}
	}
	f.forecasts = out
}

// quotaKeys returns the keys whose rule in force at now has a calendar
// window.
func quotaKeys(cfg *ratelimit.Config, now time.Time) []ratelimit.Key {
	seen := map[ratelimit.Key]bool{}
	var keys []ratelimit.Key
	add := func(k ratelimit.Key) {
		if seen[k] {
			return
		}
		seen[k] = true
		for _, w := range cfg.RuleAt(k, now).Windows {
			if w.IsCalendar() {
				keys = append(keys, k)
				return
			}
		}
	}
	for k := range cfg.Rules {
		add(k)
	}
	for _, s := range cfg.Schedules {
		add(s.Key)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	return keys
}

// observe adds one read of a window and returns its forecast.
func (f *Forecaster) observe(id seriesID, k ratelimit.Key, w ratelimit.Window, used int64, at time.Time) Forecast {
	start, end := w.Calendar.Period(at)
	f.mu.Lock()
	s := f.series[id]
	if s == nil || !s.periodStart.Equal(start) {
		// A new period starts from zero: reads of the last one say nothing
		// of its rate.
		s = &series{periodStart: start}
		f.series[id] = s
	}
	s.samples = append(s.samples, sample{at: at, used: used})
	cut := 0
	for cut < len(s.samples)-1 && at.Sub(s.samples[cut].at) > f.opts.Lookback {
		cut++
	}
	s.samples = s.samples[cut:]
	first := s.samples[0]
	f.mu.Unlock()
	return forecast(k, w, used, at, start, end, first)
}

// forecast computes a window's forecast from its use now and the oldest
// read of the lookback (first).
func forecast(k ratelimit.Key, w ratelimit.Window, used int64, at, start, end time.Time, first sample) Forecast {
	fc := Forecast{Key: k, Window: w, Limit: w.Limit, Used: used, PeriodStart: start, PeriodEnd: end, At: at}
	if span := at.Sub(first.at); span >= time.Minute {
		fc.Rate = float64(used-first.used) / span.Seconds()
	} else if since := at.Sub(start); since > 0 {
		fc.Rate = float64(used) / since.Seconds()
	}
	fc.Rate = max(fc.Rate, 0)
	switch {
	case used >= w.Limit:
		fc.ExhaustsAt = at
	case fc.Rate > 0:
		// Compared in seconds first: at a tiny rate the time left does not
		// fit a Duration.
		if left := float64(w.Limit-used) / fc.Rate; left < end.Sub(at).Seconds() {
			fc.ExhaustsAt = at.Add(time.Duration(left * float64(time.Second)))
		}
	}
	return fc
}
