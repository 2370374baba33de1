package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"payserver/internal/httpapi"
	"payserver/internal/ratelimit"
)

// redisPersistenceEvery is how long one read of Redis's persistence
// settings answers; a ping that succeeds after a failure (a reconnect, or
// a restarted Redis) reads them again at once.
const redisPersistenceEvery = time.Minute

// redisPersistenceState is what Redis says of its persistence.
type redisPersistenceState struct {
	// Known is false when the settings could not be read (CONFIG renamed
	// or refused by an ACL); Unknown says why.
	Known   bool
	Unknown string
	// Keeps is true when Redis writes an append-only file or RDB
	// snapshots; Settings shows them (`appendonly no, save ""`).
	Keeps    bool
	Settings string
}

// redisPersistence reads whether Redis keeps its data across a restart
// (CONFIG GET appendonly and save) at start and after every reconnect. The
// limiter's calendar windows (day and month caps) live in Redis: a Redis
// that keeps neither AOF nor RDB forgets them when it restarts, and the
// caps start again from zero. That is no reason to stop serving, so it is
// shown in /readyz's redis detail and logged at WARN, never made
// not-ready.
type redisPersistence struct {
	read     func(ctx context.Context) (map[string]string, error)
	calendar func() bool // the limits in force have a calendar window
	now      func() time.Time
	log      *slog.Logger

	mu      sync.Mutex
	hasRead bool
	readAt  time.Time
	pingOK  bool
	state   redisPersistenceState
	warned  string // the risk last warned of; "" when none
}

func newRedisPersistence(read func(ctx context.Context) (map[string]string, error), calendar func() bool,
	now func() time.Time, log *slog.Logger) *redisPersistence {
	return &redisPersistence{read: read, calendar: calendar, now: now, log: log}
}

// configGet reads CONFIG GET appendonly and save with get into one map.
func configGet(get func(ctx context.Context, name string) (map[string]string, error)) func(ctx context.Context) (map[string]string, error) {
	return func(ctx context.Context) (map[string]string, error) {
		out := map[string]string{}
		for _, name := range []string{"appendonly", "save"} {
			m, err := get(ctx, name)
			if err != nil {
				return nil, err
			}
			v, ok := m[name]
			if !ok {
				return nil, fmt.Errorf("CONFIG GET %s answered nothing", name)
			}
			out[name] = v
		}
		return out, nil
	}
}

// State reads the settings when the last read is older than
// redisPersistenceEvery, or when reread is set, and returns them.
func (p *redisPersistence) State(ctx context.Context, reread bool) redisPersistenceState {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	if p.hasRead && !reread && now.Sub(p.readAt) < redisPersistenceEvery {
		return p.state
	}
	settings, err := p.read(ctx)
	p.readAt, p.hasRead = now, true
	refused := false
	if err != nil {
		msg := strings.ToLower(err.Error())
		refused = strings.Contains(msg, "noperm") || strings.Contains(msg, "unknown command")
	}
	switch {
	case err != nil && !refused && p.state.Known:
		// Redis does not answer: what it said last stands until it does
		// (a reconnect reads again).
	case err != nil:
		why := "cannot read CONFIG GET appendonly/save"
		if refused {
			why = "CONFIG GET appendonly/save is refused or renamed"
		}
		p.state = redisPersistenceState{Unknown: why + " (" + err.Error() +
			"): whether Redis keeps the calendar caps across a restart is unknown"}
	default:
		aof, save := settings["appendonly"], strings.TrimSpace(settings["save"])
		p.state = redisPersistenceState{Known: true, Keeps: aof == "yes" || save != "",
			Settings: fmt.Sprintf("appendonly %s, save %q", aof, save)}
	}
	p.logChange()
	return p.state
}

// logChange warns once per risk to the calendar caps; p.mu is held.
func (p *redisPersistence) logChange() {
	risk := ""
	switch {
	case !p.hasRead || !p.calendar():
	case !p.state.Known:
		risk = p.state.Unknown
	case !p.state.Keeps:
		risk = "redis keeps neither an append-only file nor RDB snapshots (" + p.state.Settings +
			"): a Redis restart forgets the calendar caps (day and month windows start again from zero); set appendonly yes or a save schedule"
	}
	if risk != "" && risk != p.warned {
		p.log.Warn(risk)
	}
	p.warned = risk
}

// Readiness wraps the redis readiness check: when Redis answers and the
// limits in force have a calendar window, its detail says whether a Redis
// restart would forget them. It never makes the instance not ready.
func (p *redisPersistence) Readiness(check func(ctx context.Context) httpapi.Readiness) func(ctx context.Context) httpapi.Readiness {
	return func(ctx context.Context) httpapi.Readiness {
		r := check(ctx)
		ok := r.Text == "" && !r.NotReady
		p.mu.Lock()
		reconnected := ok && !p.pingOK
		p.pingOK = ok
		p.mu.Unlock()
		if !ok || !p.calendar() {
			return r
		}
		st := p.State(ctx, reconnected)
		p.mu.Lock()
		p.logChange() // the limits may have gained a calendar window since the read
		p.mu.Unlock()
		switch {
		case !st.Known:
			r.Text = "ok; " + st.Unknown
		case !st.Keeps:
			r.Text = "ok, but it keeps no data (" + st.Settings + "): a Redis restart forgets the calendar caps"
		}
		return r
	}
}

// Gauge is payserver_redis_persistence: 1 when Redis keeps its data, 0
// when it keeps none; ok is false while the settings are unknown.
func (p *redisPersistence) Gauge() (value float64, ok bool) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	st := p.State(ctx, false)
	if !st.Known {
		return 0, false
	}
	if st.Keeps {
		return 1, true
	}
	return 0, true
}

// hasCalendarWindow reports whether a rule or schedule of cfg has a day or
// month window.
func hasCalendarWindow(cfg *ratelimit.Config) bool {
	if cfg == nil {
		return false
	}
	for _, r := range cfg.Rules {
		for _, w := range r.Windows {
			if w.IsCalendar() {
				return true
			}
		}
	}
	for _, s := range cfg.Schedules {
		for _, w := range s.Rule.Windows {
			if w.IsCalendar() {
				return true
			}
		}
	}
	return false
}

// redisReadiness is /readyz's redis check, with what persistence says.
func (m *Main) redisReadiness() func(ctx context.Context) httpapi.Readiness {
	check := redisReadiness(m.limiter.Ping, m.cfg.Limiter.Policy)
	if m.persistence == nil {
		return check
	}
	return m.persistence.Readiness(check)
}
