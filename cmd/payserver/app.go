package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"payserver/internal/channel"
	"payserver/internal/channel/gateway"
	"payserver/internal/configcenter"
	"payserver/internal/decisionlog"
	"payserver/internal/metrics"
	"payserver/internal/pay"
	"payserver/internal/ratelimit"
	"payserver/internal/repo"
)

// Main is the whole running program. Run starts it; Close stops it
// gracefully. End-to-end tests start one on a random port (HTTPAddr
// "127.0.0.1:0") and read Addr.
//
// Run goes in three steps, one file each: open the backends (open.go),
// build the services on them (build.go), serve (serve.go).
type Main struct {
	cfg Config
	log *slog.Logger

	db     *gorm.DB
	schema *schemaCheck
	redis  redis.UniversalClient
	// persistence says whether Redis keeps the calendar caps across its
	// restart; nil without a Redis.
	persistence *redisPersistence
	// restarts tells when Redis restarted (its run id changed); nil
	// without a Redis.
	restarts *redisRestarts
	// durable is the embedded limiter's store, journaled in the data dir;
	// nil with a Redis.
	durable  *ratelimit.DurableStore
	limiter  *ratelimit.Limiter
	manager  *configcenter.Manager
	limitsIn *configcenter.WatchedSource // the manager's source, for ops gauges and shutdown order
	channels *channel.Registry
	gateways []*gateway.Channel // the channels served by gateways, closed last
	// messages counts the gateway messages refused (answers, notifications).
	messages *metrics.ChannelMessages
	resolver *pay.Resolver
	// orders is the order store, for the dashboard's unresolved payments
	// and the admissions report.
	orders  *repo.Orders
	metrics *metrics.Metrics
	// learned exports the learned limits (payserver_limit_learned…),
	// refreshed in the background.
	learned *metrics.LearnedLimits
	// decisions is the decision log (decision_log.go); nil when off.
	decisions *decisionlog.Log
	stats     statsWiring
	routing   routingWiring
	api       apiWiring
	server    *http.Server
	listener  net.Listener
	lock      *dataDirLock
	pprof     *http.Server

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// NewMain returns a program for cfg that logs to log.
func NewMain(cfg Config, log *slog.Logger) *Main {
	return &Main{cfg: cfg, log: log}
}

// Addr returns the address the HTTP server listens on, once Run returned.
func (m *Main) Addr() string { return m.listener.Addr().String() }

// Run opens every dependency, starts the background loops and the HTTP
// server, and returns once it is listening. On error, whatever was opened is
// closed, without logging that payserver stopped: the caller logs the
// failure first, then calls Close, which logs the stop.
func (m *Main) Run(ctx context.Context) (err error) {
	defer func() {
		if err != nil {
			_ = m.release()
		}
	}()
	bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
	m.cancel = cancel
	m.log.Info("starting payserver", "config", m.cfg)
	for _, name := range m.cfg.UnknownEnv {
		if why, ok := removedEnv(name); ok {
			m.log.Warn("removed PAYSERVER_* environment variable ignored; unset it (docs/CONFIGURATION.md, \"Removed settings\")", "name", name, "why", why)
			continue
		}
		m.log.Warn("unknown PAYSERVER_* environment variable ignored; see docs/CONFIGURATION.md for the names payserver reads", "name", name)
	}
	// Bind first: a port in use fails the start before anything is
	// created or written.
	ln, err := net.Listen("tcp", m.cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", m.cfg.HTTPAddr, err)
	}
	m.listener = ln
	if err := os.MkdirAll(m.cfg.DataDir, 0o750); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	if m.lock, err = lockDataDir(m.cfg.DataDir); err != nil {
		return err
	}
	m.metrics = metrics.New()
	if err := m.startPprof(); err != nil {
		return err
	}
	// open
	if err := m.openDB(ctx); err != nil {
		return err
	}
	if err := m.openRedis(bg); err != nil {
		return err
	}
	if err := m.openStats(bg); err != nil {
		return err
	}
	// build
	// The per-caller counts and the waiting metrics before the limiter,
	// which tells them.
	m.openLimitsAPI()
	if err := m.buildLimiter(bg); err != nil {
		return err
	}
	if err := m.startForecaster(bg); err != nil {
		return err
	}
	// The channels before the limits: the limits source refuses routes
	// naming channels this server does not have.
	if err := m.openChannels(); err != nil {
		return err
	}
	if err := m.openRouting(bg); err != nil {
		return err
	}
	if err := m.startLimits(bg); err != nil {
		return err
	}
	svc, ledger, err := m.buildPay(bg)
	if err != nil {
		return err
	}
	if err := m.startLimitsAPI(svc, ledger); err != nil {
		return err
	}
	// serve
	if err := m.serve(svc); err != nil {
		return err
	}
	return m.startMembership(bg)
}

func (m *Main) goBackground(f func()) {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		f()
	}()
}

// Close drains in-flight requests (up to ShutdownTimeout), stops the
// background loops, closes every connection and logs that payserver
// stopped. It is safe to call more than once, and after a failed Run.
func (m *Main) Close() error {
	err := m.release()
	m.log.Info("payserver stopped")
	return err
}

// release is Close without its log line.
func (m *Main) release() error {
	served := m.server != nil // Shutdown below closes the listener
	var errs []error
	if m.server != nil {
		ctx, cancel := context.WithTimeout(context.Background(), m.cfg.ShutdownTimeout)
		if err := m.server.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("http shutdown: %w", err))
		}
		cancel()
		m.server = nil
	}
	m.closeLimitsAPI(context.Background())
	if m.cancel != nil {
		m.cancel()
	}
	if m.pprof != nil {
		_ = m.pprof.Close()
		m.pprof = nil
	}
	m.wg.Wait()
	if err := m.drainStats(); err != nil {
		errs = append(errs, err)
	}
	if err := m.drainRouting(); err != nil {
		errs = append(errs, err)
	}
	for _, gw := range m.gateways {
		gw.CloseIdle()
	}
	m.gateways = nil
	if m.durable != nil {
		if err := m.durable.Close(); err != nil {
			errs = append(errs, err)
		}
		m.durable = nil
	}
	if m.redis != nil {
		if err := m.redis.Close(); err != nil {
			errs = append(errs, err)
		}
		m.redis = nil
	}
	if m.db != nil {
		if err := repo.Close(m.db); err != nil {
			errs = append(errs, err)
		}
		m.db = nil
	}
	if !served && m.listener != nil {
		_ = m.listener.Close() // bound but never served: a failed start
	}
	if err := m.lock.release(); err != nil {
		errs = append(errs, err)
	}
	m.lock = nil
	return errors.Join(errs...)
}
