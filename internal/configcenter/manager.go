package configcenter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"payserver/internal/atomicfile"
	"payserver/internal/limits"
	"payserver/internal/ratelimit"
)

// Applier takes a validated limits snapshot. *ratelimit.Limiter implements it.
type Applier interface {
	SetConfig(c *ratelimit.Config)
}

// ChangeKind says what a history entry records.
type ChangeKind string

// The kinds of history entries.
const (
	// KindLoad is the first document an instance puts in force (at its
	// start, from the source or the last good copy on disk). Keys lists
	// every key as "KEY: absent -> rule". It is not a change of limits.
	KindLoad ChangeKind = "load"
	// KindChange is a document that changed at least one key's rule.
	KindChange ChangeKind = "change"
	// KindUnchanged is a document whose rules are those in force: a new
	// version (another md5) such as a comment-only edit, or the version in
	// force delivered again after a refusal (a reverted bad edit), which
	// supersedes the refusal. Keys is empty.
	KindUnchanged ChangeKind = "unchanged"
	// KindRefused is a document that was refused; Refusal says why and
	// the limits in force did not change.
	KindRefused ChangeKind = "refused"
	// KindLearnedReset is an admin's reset of a key's learned limits
	// (POST /limits/learned/reset): Name is the key, Source "admin", and
	// Keys lists each learned limit that was in force, as "KEY WINDOW:
	// learned N of C since T -> reset". It is not a document and not a
	// change of the limits document.
	KindLearnedReset ChangeKind = "learned_reset"
)

// IsChange reports whether the entry changed the limits in force. Entries
// stored before kinds existed have an empty kind and were changes.
func (k ChangeKind) IsChange() bool { return k == KindChange || k == "" }

// Change is one applied or refused version of the limits document, for the
// audit trail.
type Change struct {
	// ID is the history row's id (set when read back; 0 before).
	ID     uint64
	At     time.Time
	Kind   ChangeKind
	Source string
	Name   string
	// MD5 is the document's version; "" for a deleted document.
	MD5 string
	// Keys lists each key whose rule changed as "KEY: old -> new", and
	// each route that changed as "route BIZTYPE: old -> new" (routeDiff).
	Keys []string
	// Refusal is why a KindRefused document was refused; "" otherwise.
	Refusal string
	// Instance names the instance that recorded the entry (set when read
	// back).
	Instance string
}

// History stores applied changes durably (the limit_config_history table).
type History interface {
	Record(ctx context.Context, c Change) error
}

// Hooks are told of every applied and refused document, for metrics.
type Hooks struct {
	Applied func(source string)
	Refused func(source string)
	// Document, when set, is told of every document applied, with its
	// version and bytes (the decision log keeps them for replays). It is
	// called under the Manager's lock and must not block.
	Document func(version string, content []byte)
}

// Status is what GET /limits and /readyz show about the limits in force.
type Status struct {
	Loaded   bool
	Source   string
	Name     string
	MD5      string
	LoadedAt time.Time
	// LastRefusal is the error of the last refused document, if any, and
	// LastRefusalAt when it was refused.
	LastRefusal   string
	LastRefusalAt time.Time
	// LastRefusalSuperseded is true once a good document was seen after
	// the last refusal, applied or the one already in force (a reverted
	// edit): the refusal is history, not a current problem.
	LastRefusalSuperseded bool
	Refusals              int64
	Applied               int64
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
	// Check, when set, vets every parsed document against what only the
	// running server knows (the channels it has, for routes); a document it
	// refuses is refused like an invalid one.
	Check func(*limits.Document) error
}

// Manager validates each document a Source delivers and swaps good ones into
// the Applier whole. A bad, empty or deleted document is refused: the last
// good limits stay in force, and the refusal is logged, counted and shown in
// Status. The document in force, routes included, is Document.
type Manager struct {
	source  Source
	applier Applier
	opts    ManagerOptions
	log     *slog.Logger

	mu      sync.Mutex
	status  Status
	current atomic.Pointer[limits.Document] // written under mu
	loaded  chan struct{}
	pending pendingHistory // entries History refused, for RetryHistory
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
// source until ctx ends, retrying meanwhile the history entries the store
// refused (RetryHistory).
func (m *Manager) Run(ctx context.Context) error {
	m.loadLastGood(ctx)
	if m.opts.History != nil {
		retryCtx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); m.retryHistory(retryCtx) }()
		defer func() { stop(); <-done }()
	}
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
	if err := atomicfile.Write(m.opts.LastGoodPath, content, 0o600); err != nil {
		m.log.Warn("could not keep the last good limits on disk", "path", m.opts.LastGoodPath, "err", err)
	}
}

// Document returns the document in force, or nil before the first good one.
// It takes no lock: the pay flow reads its routes on every routed payment.
func (m *Manager) Document() *limits.Document { return m.current.Load() }

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
// refusal error for a bad document and nil otherwise. Every applied version
// and every refusal is stored in History after the lock is released, so a
// slow or unreachable database never blocks GET /limits, /readyz or the
// next document; an entry the store refuses is kept and written later
// (RetryHistory), so that the trail has the document loaded before
// `payserver migrate` made the history table.
func (m *Manager) Apply(ctx context.Context, d Document) error {
	switch {
	case d.Deleted:
		d.MD5 = "" // a deleted document has no version
	case d.MD5 == "":
		d.MD5 = ContentMD5(d.Content)
	}
	entry, err := m.apply(d)
	if entry == nil || m.opts.History == nil {
		return err
	}
	m.record(ctx, *entry)
	return err
}

// apply validates and swaps under the lock; it returns the history entry to
// record (nil when d is the version in force) and the refusal error.
func (m *Manager) apply(d Document) (*Change, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var doc *limits.Document
	var err error
	if d.Deleted {
		err = errors.New("the limits document was deleted")
	} else {
		doc, err = limits.Parse(d.Content)
		if err == nil && m.opts.Check != nil {
			err = m.opts.Check(doc)
		}
	}
	now := m.opts.Now().UTC()
	if err != nil {
		m.status.LastRefusal, m.status.LastRefusalAt = err.Error(), now
		m.status.LastRefusalSuperseded = false
		m.status.Refusals++
		if m.opts.Hooks.Refused != nil {
			m.opts.Hooks.Refused(d.Source)
		}
		attrs := []any{"source", d.Source, "name", d.Name, "err", err}
		if d.MD5 != "" {
			attrs = append(attrs, "md5", d.MD5)
		}
		if m.status.Loaded {
			m.log.Warn("limits document refused; the last good limits stay in force", append(attrs, "inForceMD5", m.status.MD5)...)
		} else {
			m.log.Warn("limits document refused; no limits are in force yet, so payments are refused until a valid document arrives", attrs...)
		}
		return &Change{At: now, Kind: KindRefused, Source: d.Source, Name: d.Name, MD5: d.MD5, Refusal: err.Error()}, err
	}
	if m.status.Loaded && m.status.MD5 == d.MD5 {
		if m.status.Source != d.Source {
			// The source confirmed what was read back from disk.
			m.status.Source, m.status.Name = d.Source, d.Name
		}
		if m.status.LastRefusal == "" || m.status.LastRefusalSuperseded {
			return nil, nil
		}
		// A refused edit was reverted to the document in force: nothing
		// changes, but the refusal is past.
		m.status.LastRefusalSuperseded = true
		m.log.Info("limits document in force delivered again; it supersedes the refusal", "source", d.Source, "name", d.Name,
			"md5", d.MD5, "refusedAt", m.status.LastRefusalAt)
		return &Change{At: now, Kind: KindUnchanged, Source: d.Source, Name: d.Name, MD5: d.MD5}, nil
	}
	if d.Source != lastGoodSource {
		m.keepLastGood(d.Content)
	}
	changed := Diff(m.current.Load(), doc)
	kind := KindChange
	switch {
	case !m.status.Loaded:
		kind = KindLoad
	case len(changed) == 0:
		kind = KindUnchanged
	}
	m.applier.SetConfig(doc.Config)
	m.current.Store(doc)
	m.status.Loaded, m.status.Source, m.status.Name, m.status.MD5 = true, d.Source, d.Name, d.MD5
	m.status.LoadedAt = now
	m.status.Applied++
	if m.status.LastRefusal != "" {
		m.status.LastRefusalSuperseded = true
	}
	if m.opts.Hooks.Applied != nil {
		m.opts.Hooks.Applied(d.Source)
	}
	if m.opts.Hooks.Document != nil {
		m.opts.Hooks.Document(d.MD5, d.Content)
	}
	m.log.Info("limits applied", "kind", kind, "source", d.Source, "name", d.Name, "md5", d.MD5, "keys", len(doc.Config.Rules), "changed", changed)
	if kind == KindLoad {
		close(m.loaded)
	}
	return &Change{At: now, Kind: kind, Source: d.Source, Name: d.Name, MD5: d.MD5, Keys: changed}, nil
}

// Diff lists the keys whose rules differ between two documents as
// "KEY: old -> new", the routes that differ as "route BIZTYPE: old -> new"
// (routeDiff), and the schedules that differ as "schedule KEY FROM/TO: old
// -> new" (scheduleDiff), sorted. A nil document has no keys.
func Diff(old, cur *limits.Document) []string {
	keys := map[ratelimit.Key]bool{}
	var oldCfg, curCfg *ratelimit.Config
	var oldRoutes, curRoutes limits.Routes
	if old != nil {
		oldCfg, oldRoutes = old.Config, old.Routes
	}
	if cur != nil {
		curCfg, curRoutes = cur.Config, cur.Routes
	}
	var oldRules, curRules map[ratelimit.Key]ratelimit.Rule
	if oldCfg != nil {
		oldRules = oldCfg.Rules
	}
	if curCfg != nil {
		curRules = curCfg.Rules
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
	out = append(out, routeDiff(oldRoutes, curRoutes)...)
	out = append(out, scheduleDiff(oldCfg, curCfg)...)
	sort.Strings(out)
	return out
}
