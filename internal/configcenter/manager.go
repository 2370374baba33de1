package configcenter

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"payserver/internal/ratelimit"
)

// Applier takes a validated limits snapshot. *ratelimit.Limiter implements it.
type Applier interface {
	SetConfig(c *ratelimit.Config)
}

// Change is one applied version of the limits document, for the audit trail.
type Change struct {
	At     time.Time
	Source string
	Name   string
	MD5    string
	// Keys lists each key whose rule changed as "KEY: old -> new".
	Keys []string
}

// History stores applied changes durably (the limit_config_history table).
type History interface {
	Record(ctx context.Context, c Change) error
}

// Hooks are told of every applied and refused document, for metrics.
type Hooks struct {
	Applied func(source string)
	Refused func(source string)
}

// Status is what GET /limits and /readyz show about the limits in force.
type Status struct {
	Loaded   bool
	Source   string
	Name     string
	MD5      string
	LoadedAt time.Time
	// LastRefusal is the error of the last refused document, if any.
	LastRefusal   string
	LastRefusalAt time.Time
	Refusals      int64
	Applied       int64
	// Describe is the source's own description.
	Describe string
}

// ManagerOptions configures a Manager.
type ManagerOptions struct {
	Logger  *slog.Logger
	History History // optional
	Hooks   Hooks   // optional
	Now     func() time.Time
	// LastGoodPath, when set, is a file where every applied document is
	// kept. At start it is applied first (source "last-good"), so that a
	// restart while the source is unreachable, or while the source's own
	// snapshot holds a refused document, still enforces the last good
	// limits instead of none.
	LastGoodPath string
}

// Manager validates each document a Source delivers and swaps good ones into
// the Applier whole. A bad, empty or deleted document is refused: the last
// good limits stay in force, and the refusal is logged, counted and shown in
// Status.
type Manager struct {
	source  Source
	applier Applier
	opts    ManagerOptions
	log     *slog.Logger

	mu      sync.Mutex
	status  Status
	current *ratelimit.Config
	loaded  chan struct{}
}

// NewManager returns a Manager feeding applier from source.
func NewManager(source Source, applier Applier, opts ManagerOptions) (*Manager, error) {
	if source == nil || applier == nil {
		return nil, errors.New("configcenter: nil source or applier")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Manager{
		source: source, applier: applier, opts: opts, log: opts.Logger,
		status: Status{Describe: source.Describe()},
		loaded: make(chan struct{}),
	}, nil
}

// Run applies the last good document kept on disk (if any), then runs the
// source until ctx ends.
func (m *Manager) Run(ctx context.Context) error {
	m.loadLastGood(ctx)
	return m.source.Run(ctx, func(d Document) { _ = m.Apply(ctx, d) })
}

// lastGoodSource names documents read back from ManagerOptions.LastGoodPath.
const lastGoodSource = "last-good"

func (m *Manager) loadLastGood(ctx context.Context) {
	if m.opts.LastGoodPath == "" {
		return
	}
	data, err := os.ReadFile(m.opts.LastGoodPath)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			m.log.Warn("could not read the last good limits", "path", m.opts.LastGoodPath, "err", err)
		}
		return
	}
	m.log.Info("applying the last good limits kept on disk until the source answers", "path", m.opts.LastGoodPath)
	_ = m.Apply(ctx, Document{Content: data, Source: lastGoodSource, Name: m.opts.LastGoodPath})
}

// keepLastGood writes content atomically to LastGoodPath.
func (m *Manager) keepLastGood(content []byte) {
	if m.opts.LastGoodPath == "" {
		return
	}
	tmp := m.opts.LastGoodPath + ".tmp"
	err := os.MkdirAll(filepath.Dir(tmp), 0o750)
	if err == nil {
		err = os.WriteFile(tmp, content, 0o600)
	}
	if err == nil {
		err = os.Rename(tmp, m.opts.LastGoodPath)
	}
	if err != nil {
		m.log.Warn("could not keep the last good limits on disk", "path", m.opts.LastGoodPath, "err", err)
	}
}

// Loaded is closed once the first good document is in force.
func (m *Manager) Loaded() <-chan struct{} { return m.loaded }

// Status returns a copy of the current status.
func (m *Manager) Status() Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.status
}

// Ready returns nil once limits are loaded, for /readyz.
func (m *Manager) Ready(context.Context) error {
	st := m.Status()
	if st.Loaded {
		return nil
	}
	if st.LastRefusal != "" {
		return fmt.Errorf("no limits loaded from %s; last document refused: %s", st.Describe, st.LastRefusal)
	}
	return fmt.Errorf("no limits loaded yet from %s", st.Describe)
}

// Apply validates d and, if good and new, puts it in force. It returns the
// refusal error for a bad document and nil otherwise. The change is stored
// in History after the lock is released, so a slow or unreachable database
// never blocks GET /limits, /readyz or the next document.
func (m *Manager) Apply(ctx context.Context, d Document) error {
	if d.MD5 == "" {
		sum := md5.Sum(d.Content)
		d.MD5 = hex.EncodeToString(sum[:])
	}
	change, err := m.apply(d)
	if err != nil || change == nil || m.opts.History == nil {
		return err
	}
	hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := m.opts.History.Record(hctx, *change); err != nil {
		m.log.Warn("could not store the limits change in history", "md5", d.MD5, "err", err)
	}
	return nil
}

// apply validates and swaps under the lock; it returns the change to record
// when d was applied.
func (m *Manager) apply(d Document) (*Change, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var cfg *ratelimit.Config
	var err error
	if d.Deleted {
		err = errors.New("the limits document was deleted")
	} else {
		cfg, err = ratelimit.ParseDocument(d.Content)
	}
	if err != nil {
		m.status.LastRefusal, m.status.LastRefusalAt = err.Error(), m.opts.Now().UTC()
		m.status.Refusals++
		if m.opts.Hooks.Refused != nil {
			m.opts.Hooks.Refused(d.Source)
		}
		m.log.Warn("limits document refused; the last good limits stay in force",
			"source", d.Source, "name", d.Name, "md5", d.MD5, "err", err, "inForceMD5", m.status.MD5)
		return nil, err
	}
	if m.status.Loaded && m.status.MD5 == d.MD5 {
		if m.status.Source != d.Source {
			// The source confirmed what was read back from disk.
			m.status.Source, m.status.Name = d.Source, d.Name
		}
		return nil, nil
	}
	if d.Source != lastGoodSource {
		m.keepLastGood(d.Content)
	}
	changed := Diff(m.current, cfg)
	m.applier.SetConfig(cfg)
	m.current = cfg
	first := !m.status.Loaded
	m.status.Loaded, m.status.Source, m.status.Name, m.status.MD5 = true, d.Source, d.Name, d.MD5
	m.status.LoadedAt = m.opts.Now().UTC()
	m.status.Applied++
	if m.opts.Hooks.Applied != nil {
		m.opts.Hooks.Applied(d.Source)
	}
	m.log.Info("limits applied", "source", d.Source, "name", d.Name, "md5", d.MD5, "keys", len(cfg.Rules), "changed", changed)
	if first {
		close(m.loaded)
	}
	return &Change{At: m.status.LoadedAt, Source: d.Source, Name: d.Name, MD5: d.MD5, Keys: changed}, nil
}

// Diff lists the keys whose rules differ between two snapshots, sorted, as
// "KEY: old -> new". A nil snapshot has no keys.
func Diff(old, cur *ratelimit.Config) []string {
	keys := map[ratelimit.Key]bool{}
	var oldRules, curRules map[ratelimit.Key]ratelimit.Rule
	if old != nil {
		oldRules = old.Rules
	}
	if cur != nil {
		curRules = cur.Rules
	}
	for k := range oldRules {
		keys[k] = true
	}
	for k := range curRules {
		keys[k] = true
	}
	var out []string
	for k := range keys {
		o, ok1 := oldRules[k]
		n, ok2 := curRules[k]
		os, ns := DescribeRule(o, ok1), DescribeRule(n, ok2)
		if os != ns {
			out = append(out, k.String()+": "+os+" -> "+ns)
		}
	}
	sort.Strings(out)
	return out
}

// DescribeRule renders a rule as ops write it, such as "20/1s+600/1m
// (shadow)"; present false renders "absent".
func DescribeRule(r ratelimit.Rule, present bool) string {
	if !present {
		return "absent"
	}
	if r.IsUnlimited() {
		s := "unlimited"
		if r.Shadow {
			s += " (shadow)"
		}
		return s
	}
	parts := make([]string, len(r.Windows))
	for i, w := range r.Windows {
		parts[i] = fmt.Sprintf("%d/%s", w.Limit, FormatWindow(w.Size))
	}
	s := strings.Join(parts, "+")
	if r.Shadow {
		s += " (shadow)"
	}
	return s
}

// FormatWindow renders a window size compactly: 1s, 1m, 1h, 1d, 500ms.
func FormatWindow(d time.Duration) string {
	switch {
	case d%(24*time.Hour) == 0:
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	case d%time.Second == 0:
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return fmt.Sprintf("%dms", d/time.Millisecond)
}
