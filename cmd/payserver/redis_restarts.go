package main

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"payserver/internal/retry"
)

// redisRestartsEvery is how often the run ids are read in the background,
// besides at start and at each GET /limits and dashboard view.
const redisRestartsEvery = 10 * time.Second

// redisRestarts tells when Redis restarted, or failed over to another
// master, since payserver started: a Redis server gets a new run id
// (INFO server, run_id) each time it starts, and a master that took over
// has its own. Either way what the old process held may be gone: all of
// it without persistence, the writes after the last save or fsync with
// it, the writes not yet replicated after a failover. The limiter's
// calendar windows (day and month caps) live there, so their counts may
// then miss admissions made before the restart.
type redisRestarts struct {
	read     func(ctx context.Context) (map[string]string, error) // master address → run id
	calendar func() bool                                          // the limits in force have a calendar window
	now      func() time.Time
	log      *slog.Logger

	mu  sync.Mutex
	ids map[string]string
	at  time.Time // when a changed run id was last seen; zero if never
}

func newRedisRestarts(read func(ctx context.Context) (map[string]string, error), calendar func() bool,
	now func() time.Time, log *slog.Logger) *redisRestarts {
	return &redisRestarts{read: read, calendar: calendar, now: now, log: log}
}

// redisRunIDs reads the run id of every master of c: each master of a
// Cluster, by its address, or the one server of a standalone or sentinel
// client (address "").
func redisRunIDs(c redis.UniversalClient) func(ctx context.Context) (map[string]string, error) {
	return func(ctx context.Context) (map[string]string, error) {
		out := map[string]string{}
		if cc, ok := c.(*redis.ClusterClient); ok {
			var mu sync.Mutex
			err := cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
				id, err := runIDOf(ctx, m)
				mu.Lock()
				out[m.Options().Addr] = id
				mu.Unlock()
				return err
			})
			return out, err
		}
		id, err := runIDOf(ctx, c)
		out[""] = id
		return out, err
	}
}

// runIDOf reads run_id from INFO server.
func runIDOf(ctx context.Context, c redis.Cmdable) (string, error) {
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(info, "\n") {
		if id, ok := strings.CutPrefix(strings.TrimSpace(line), "run_id:"); ok {
			return id, nil
		}
	}
	return "", errors.New("INFO server has no run_id")
}

// Check reads the run ids now and returns when a restart (a changed run
// id) was last seen, zero if never. A read that fails changes nothing: the
// next one that succeeds compares with the last ids known. A restart seen
// while the limits in force have a calendar window is logged at WARN.
func (r *redisRestarts) Check(ctx context.Context) time.Time {
	ids, err := r.read(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		return r.at
	}
	var changed []string
	for addr, id := range ids {
		if was, ok := r.ids[addr]; ok && id != "" && was != id {
			changed = append(changed, addr)
		}
	}
	if r.ids == nil {
		r.ids = map[string]string{}
	}
	for addr, id := range ids {
		if id != "" {
			r.ids[addr] = id
		}
	}
	if len(changed) > 0 {
		r.at = r.now()
		if r.calendar() {
			r.log.Warn("redis restarted or failed over (its run id changed): the calendar caps' counts may miss admissions made before now; GET /limits and the dashboard mark them",
				"masters", changed)
		}
	}
	return r.at
}

// Run checks every redisRestartsEvery until ctx ends.
func (r *redisRestarts) Run(ctx context.Context) {
	retry.Every(ctx, redisRestartsEvery, time.Second, func(ctx context.Context) { r.Check(ctx) })
}
