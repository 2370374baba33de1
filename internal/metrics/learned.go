package metrics

import (
	"context"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"payserver/internal/ratelimit"
)

// LearnedReader is what the learned-limit metrics read: the limits in
// force and the learned limits of many keys at once from the shared store
// (in batches of keys on the in-process stores, several keys at a time on
// Redis). *ratelimit.Limiter implements it.
type LearnedReader interface {
	Config() *ratelimit.Config
	LearnedOf(ctx context.Context, keys []ratelimit.Key) []ratelimit.KeyLearned
}

// LearnedRefresh is how often LearnedLimits.Run reads the learned limits.
const LearnedRefresh = 15 * time.Second

// learnedPassTimeout bounds one pass over every key.
const learnedPassTimeout = 10 * time.Second

// learnedSeries is one learning window's values at the last pass.
type learnedSeries struct {
	key, window string
	configured  int64
	// inForce is the limit the learned state enforces now (min(configured,
	// learned), 0 until its not-before); absent when none is in force.
	inForce *int64
}

// LearnedLimits exports, for every sliding count window of the limits
// document in force whose rule learns (labels key and window, such as
// "count/1s"):
//
//   - payserver_limit_configured: its configured limit;
//   - payserver_limit_learned: the limit its learned state enforces now
//     (the smaller of the configured and the learned limit; 0 while the
//     channel's retry-after holds it); absent when none is in force;
//   - payserver_limit_learned_ratio: what it enforces now ÷ its
//     configured limit: 1 when no learned limit is in force.
//
// The values are read from the limiter's shared store by Refresh (Run:
// every LearnedRefresh, and at once after Kick), one store call per key,
// and exported at each scrape from the last pass. A key whose read fails
// keeps its last values. Labels are keys of the document, so bounded.
type LearnedLimits struct {
	r    LearnedReader
	now  func() time.Time
	log  *slog.Logger
	kick chan struct{}
	last atomic.Pointer[[]learnedSeries]
	mu   sync.Mutex // one pass at a time

	configured, learned, ratio *prometheus.Desc
}

// NewLearnedLimits registers the learned-limit metrics, read from r; log
// is told of failed reads. They have no series until the first Refresh.
func (m *Metrics) NewLearnedLimits(r LearnedReader, log *slog.Logger) *LearnedLimits {
	l := newLearnedLimits(r, time.Now, log)
	m.Registry.MustRegister(l)
	return l
}

func newLearnedLimits(r LearnedReader, now func() time.Time, log *slog.Logger) *LearnedLimits {
	labels := []string{"key", "window"}
	l := &LearnedLimits{r: r, now: now, log: log, kick: make(chan struct{}, 1),
		configured: prometheus.NewDesc("payserver_limit_configured",
			"The configured limit of a sliding count window that learns from the channel's throttles.", labels, nil),
		learned: prometheus.NewDesc("payserver_limit_learned",
			"The limit a window learned from the channel's throttles enforces now: min(configured, learned), 0 during the channel's retry-after; absent when none is in force.", labels, nil),
		ratio: prometheus.NewDesc("payserver_limit_learned_ratio",
			"What a learning window enforces now ÷ its configured limit: 1 when no learned limit is in force.", labels, nil),
	}
	l.last.Store(&[]learnedSeries{})
	return l
}

// Describe implements prometheus.Collector.
func (l *LearnedLimits) Describe(ch chan<- *prometheus.Desc) {
	ch <- l.configured
	ch <- l.learned
	ch <- l.ratio
}

// Collect implements prometheus.Collector.
func (l *LearnedLimits) Collect(ch chan<- prometheus.Metric) {
	for _, s := range *l.last.Load() {
		ch <- prometheus.MustNewConstMetric(l.configured, prometheus.GaugeValue, float64(s.configured), s.key, s.window)
		ratio := 1.0
		if s.inForce != nil {
			ch <- prometheus.MustNewConstMetric(l.learned, prometheus.GaugeValue, float64(*s.inForce), s.key, s.window)
			ratio = float64(min(*s.inForce, s.configured)) / float64(s.configured)
		}
		ch <- prometheus.MustNewConstMetric(l.ratio, prometheus.GaugeValue, ratio, s.key, s.window)
	}
}

// Kick asks Run for a pass now (after the limits changed); it never
// blocks.
func (l *LearnedLimits) Kick() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// Run refreshes the metrics at once, then every interval and after each
// Kick, until ctx ends.
func (l *LearnedLimits) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		l.Refresh(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-l.kick:
		}
	}
}

// Refresh reads the learned limits of every key of the limits in force
// whose rule in force learns, in one LearnedOf within learnedPassTimeout
// (pipelined on Redis), and makes them the exported values.
func (l *LearnedLimits) Refresh(ctx context.Context) {
	l.mu.Lock()
	defer l.mu.Unlock()
	cfg := l.r.Config()
	if cfg == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, learnedPassTimeout)
	defer cancel()
	prev := map[[2]string]learnedSeries{}
	for _, s := range *l.last.Load() {
		prev[[2]string{s.key, s.window}] = s
	}
	now := l.now()
	var out []learnedSeries
	failed := 0
	var keys []ratelimit.Key
	var keyWindows [][]ratelimit.Window
	for _, k := range ruleKeys(cfg) {
		if windows := learningWindows(cfg.RuleAt(k, now)); len(windows) > 0 {
			keys, keyWindows = append(keys, k), append(keyWindows, windows)
		}
	}
	reads := l.r.LearnedOf(ctx, keys)
	for i, k := range keys {
		windows := keyWindows[i]
		got, err := reads[i].Limits, reads[i].Err
		if err != nil {
			failed++
		}
		for _, w := range windows {
			s := learnedSeries{key: k.String(), window: w.Name(), configured: w.Limit}
			if err != nil {
				s.inForce = prev[[2]string{s.key, s.window}].inForce
			}
			for _, ll := range got {
				if ll.Window.ID() == w.ID() {
					v := ll.Limit
					s.inForce = &v
				}
			}
			out = append(out, s)
		}
	}
	if failed > 0 && l.log != nil {
		l.log.Warn("could not read some learned limits; their metrics keep the last values", "keys", failed)
	}
	l.last.Store(&out)
}

// ruleKeys returns the keys of cfg's rules and schedules, sorted.
func ruleKeys(cfg *ratelimit.Config) []ratelimit.Key {
	seen := map[ratelimit.Key]bool{}
	for k := range cfg.Rules {
		seen[k] = true
	}
	for _, s := range cfg.Schedules {
		seen[s.Key] = true
	}
	keys := make([]ratelimit.Key, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	return keys
}

// learningWindows returns the windows of r that learn: its sliding count
// windows with a limit of at least 1, unless r's adaptive setting is off.
func learningWindows(r ratelimit.Rule) []ratelimit.Window {
	if r.Adaptive.Off {
		return nil
	}
	var out []ratelimit.Window
	for _, w := range r.Windows {
		if !w.Amount && !w.IsCalendar() && w.Limit >= 1 {
			out = append(out, w)
		}
	}
	return out
}

// Throttles counts the channels' throttles:
// payserver_channel_throttles_total{channel}. It implements
// pay.ThrottleObserver. The channels given to NewThrottles start at 0;
// any other is counted as "other".
type Throttles struct {
	known map[string]bool
	total *prometheus.CounterVec
}

// NewThrottles registers payserver_channel_throttles_total, with a series
// at 0 for each of channels.
func (m *Metrics) NewThrottles(channels []string) *Throttles {
	t := &Throttles{known: map[string]bool{}, total: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "payserver_channel_throttles_total",
		Help: "Calls the channel answered THROTTLED (too busy; a gateway's throttleCodes included), by channel.",
	}, []string{"channel"})}
	for _, c := range channels {
		t.known[c] = true
		t.total.WithLabelValues(c)
	}
	m.Registry.MustRegister(t.total)
	return t
}

// Throttled implements pay.ThrottleObserver.
func (t *Throttles) Throttled(channel string) {
	if !t.known[channel] {
		channel = Other
	}
	t.total.WithLabelValues(channel).Inc()
}
