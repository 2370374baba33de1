package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"payserver/internal/channel"
	"payserver/internal/configcenter"
	"payserver/internal/httpapi"
	"payserver/internal/metrics"
	"payserver/internal/pay"
	"payserver/internal/ratelimit"
	"payserver/internal/repo"
)

// Main is the whole running program. Run starts it; Close stops it
// gracefully. End-to-end tests start one on a random port (HTTPAddr
// "127.0.0.1:0") and read Addr.
type Main struct {
	cfg Config
	log *slog.Logger

	db       *gorm.DB
	redis    redis.UniversalClient
	mini     *miniredis.Miniredis
	limiter  *ratelimit.Limiter
	manager  *configcenter.Manager
	channels *channel.Registry
	metrics  *metrics.Metrics
	stats    statsWiring
	server   *http.Server
	listener net.Listener
	pprof    *http.Server

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
// closed.
func (m *Main) Run(ctx context.Context) (err error) {
	defer func() {
		if err != nil {
			_ = m.Close()
		}
	}()
	bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
	m.cancel = cancel
	m.log.Info("starting payserver", "config", m.cfg)
	if err := os.MkdirAll(m.cfg.DataDir, 0o750); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	m.metrics = metrics.New()
	if err := m.startPprof(); err != nil {
		return err
	}
	if err := m.openDB(ctx); err != nil {
		return err
	}
	if err := m.openRedis(bg); err != nil {
		return err
	}
	if err := m.openStats(bg); err != nil {
		return err
	}
	store, err := ratelimit.NewRedisStoreWithOptions(m.redis, ratelimit.RedisStoreOptions{
		Coalesce: m.cfg.Limiter.Coalesce,
		MaxBatch: m.cfg.Limiter.MaxBatch,
	})
	if err != nil {
		return err
	}
	if m.cfg.Limiter.Coalesce {
		m.metrics.WatchCoalescer(store.CoalesceStats)
	}
	wctx, cancel := context.WithTimeout(bg, 2*time.Second)
	if err := store.Warm(wctx); err != nil {
		m.log.Warn("limiter scripts not loaded at start; checks degrade until Redis answers", "err", err)
	}
	cancel()
	m.limiter, err = ratelimit.New(store, ratelimit.Options{
		Timeout:          m.cfg.Limiter.Timeout,
		Policy:           ratelimit.Policy(m.cfg.Limiter.Policy),
		LocalShare:       m.cfg.LocalShare(),
		DisableNearCache: !m.cfg.Limiter.NearCache,
		Unconfigured:     ratelimit.Policy(m.cfg.Limiter.Unconfigured),
		Logger:           m.log.With("component", "limiter"),
		Observer:         ratelimit.MultiObserver(m.metrics, m.stats.agg),
	})
	if err != nil {
		return err
	}
	if err := m.startLimits(bg); err != nil {
		return err
	}
	if err := m.openChannels(); err != nil {
		return err
	}
	orders, err := repo.NewOrdersWithOptions(m.db, repo.OrdersOptions{
		GroupCommit: m.cfg.DBGroupCommit, BatchGets: m.cfg.DBBatchReads, MaxBatch: m.cfg.DBMaxBatch,
	})
	if err != nil {
		return err
	}
	m.metrics.WatchOrderBatches(func() map[string][2]int64 {
		st := orders.Stats()
		return map[string][2]int64{
			"create": {st.Create.Calls, st.Create.Batched},
			"finish": {st.Finish.Calls, st.Finish.Batched},
			"get":    {st.Get.Calls, st.Get.Batched},
		}
	})
	m.log.Info("order store", "groupCommit", m.cfg.DBGroupCommit, "batchReads", m.cfg.DBBatchReads)
	svc, err := pay.NewService(orders, m.limiter, m.channels, pay.Options{
		ChannelTimeout: m.cfg.ChannelTimeout,
		StaleAfter:     m.cfg.OrderStaleAfter,
		Logger:         m.log.With("component", "pay"),
	})
	if err != nil {
		return err
	}
	sweep := 30 * time.Second
	if m.cfg.OrderStaleAfter > 0 {
		sweep = min(sweep, max(m.cfg.OrderStaleAfter/2, 100*time.Millisecond))
	}
	m.goBackground(func() { svc.RunSweeper(bg, sweep) })
	return m.serve(svc)
}

func (m *Main) goBackground(f func()) {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		f()
	}()
}

func (m *Main) openDB(ctx context.Context) error {
	opts := repo.OpenOptions{Driver: repo.MySQL, DSN: m.cfg.MySQLDSN, Logger: m.log.With("component", "db")}
	migrate := m.cfg.AutoMigrate
	if m.cfg.MySQLDSN == "" {
		opts.Driver, opts.DSN, migrate = repo.SQLite, filepath.Join(m.cfg.DataDir, "payserver.db"), true
	}
	m.log.Info("database backend", "driver", string(opts.Driver))
	db, err := repo.Open(ctx, opts)
	if err != nil {
		return err
	}
	m.db = db
	if migrate {
		if err := repo.Migrate(ctx, db, opts.Driver); err != nil {
			return err
		}
	}
	return nil
}

// openRedis connects to the configured Redis (standalone or Cluster), or
// starts the embedded Redis-protocol server so that the same Lua path runs.
func (m *Main) openRedis(ctx context.Context) error {
	addrs := m.cfg.RedisAddrs
	if len(addrs) == 0 {
		mini := miniredis.NewMiniRedis()
		if err := mini.StartAddr("127.0.0.1:0"); err != nil {
			return fmt.Errorf("embedded redis: %w", err)
		}
		m.mini = mini
		addrs = []string{mini.Addr()}
		m.log.Info("redis backend", "kind", "embedded", "addr", mini.Addr())
		// The embedded server expires keys only when told time passed.
		m.goBackground(func() { tickEmbeddedRedis(ctx, mini) })
	} else if len(addrs) == 1 {
		m.log.Info("redis backend", "kind", "standalone", "addr", addrs[0])
	} else {
		m.log.Info("redis backend", "kind", "cluster", "addrs", addrs)
	}
	opts := &redis.UniversalOptions{
		Addrs:                 addrs,
		Password:              m.cfg.RedisPassword,
		DialTimeout:           250 * time.Millisecond,
		ReadTimeout:           500 * time.Millisecond,
		WriteTimeout:          500 * time.Millisecond,
		ContextTimeoutEnabled: true,
		PoolSize:              128,
		MinIdleConns:          8,
		PoolTimeout:           100 * time.Millisecond,
		MaxRetries:            2,
	}
	if len(addrs) > 1 {
		opts.IsClusterMode = true
	}
	if len(addrs) > 1 {
		// go-redis re-reads slot ownership only after MOVED/ASK or when its
		// copy is older than this (default 60 s). A dead master refuses
		// connections, which triggers neither, so without a short interval
		// payserver kept routing to it long after its replica took over.
		copts := opts.Cluster()
		copts.ClusterStateReloadInterval = time.Second
		m.redis = redis.NewClusterClient(copts)
	} else {
		m.redis = redis.NewUniversalClient(opts)
	}
	return nil
}

func tickEmbeddedRedis(ctx context.Context, mini *miniredis.Miniredis) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			mini.FastForward(time.Second)
		}
	}
}

// startLimits picks the limits source (Nacos when an address is set, else
// the watched file), starts it, and waits briefly for the first document.
func (m *Main) startLimits(ctx context.Context) error {
	var src configcenter.Source
	if len(m.cfg.Nacos.Addrs) > 0 {
		level, _ := parseLevel(m.cfg.LogLevel)
		ns, err := configcenter.NewNacosSource(configcenter.NacosOptions{
			Addrs: m.cfg.Nacos.Addrs, Namespace: m.cfg.Nacos.Namespace,
			Group: m.cfg.Nacos.Group, DataID: m.cfg.Nacos.DataID,
			Username: m.cfg.Nacos.Username, Password: m.cfg.Nacos.Password,
			CacheDir: filepath.Join(m.cfg.DataDir, "nacos", "cache"),
			LogDir:   filepath.Join(m.cfg.DataDir, "nacos", "log"),
			Logger:   m.log.With("component", "nacos"), LogLevel: level,
		})
		if err != nil {
			return err
		}
		src = ns
	} else {
		fs, err := configcenter.NewFileSource(m.cfg.LimitsFile, configcenter.FileOptions{Logger: m.log.With("component", "limits-file")})
		if err != nil {
			return err
		}
		src = fs
	}
	applier := applierFunc(func(c *ratelimit.Config) {
		m.metrics.SetKeys(c)
		m.limiter.SetConfig(c)
	})
	history, err := repo.NewLimitHistory(m.db, instanceName(m.cfg.HTTPAddr))
	if err != nil {
		return err
	}
	mgr, err := configcenter.NewManager(src, applier, configcenter.ManagerOptions{
		Logger:       m.log.With("component", "limits"),
		History:      history,
		LastGoodPath: filepath.Join(m.cfg.DataDir, "limits", "last-good.yaml"),
		Hooks:        configcenter.Hooks{Applied: m.metrics.ConfigApplied, Refused: m.metrics.ConfigRefused},
	})
	if err != nil {
		return err
	}
	m.manager = mgr
	m.log.Info("limits source", "source", src.Describe())
	m.goBackground(func() {
		if err := mgr.Run(ctx); err != nil {
			m.log.Error("limits source stopped", "err", err)
		}
	})
	select {
	case <-mgr.Loaded():
	case <-time.After(3 * time.Second):
		policy := "every key is unlimited"
		if m.cfg.Limiter.Unconfigured == "deny" {
			policy = "every payment is refused with 503"
		}
		m.log.Warn("no limits loaded after 3s (no document, no server, no snapshot); until a valid document arrives "+policy,
			"source", src.Describe(), "defaultPolicy", m.cfg.Limiter.Unconfigured)
	}
	return nil
}

type applierFunc func(*ratelimit.Config)

func (f applierFunc) SetConfig(c *ratelimit.Config) { f(c) }

func (m *Main) openChannels() error {
	codes := make([]string, 0, len(m.cfg.Channels))
	for code := range m.cfg.Channels {
		codes = append(codes, code)
	}
	sort.Strings(codes)
	chs := make([]channel.Channel, 0, len(codes))
	for _, code := range codes {
		sim, err := channel.NewSimulator(code, m.cfg.Channels[code])
		if err != nil {
			return err
		}
		chs = append(chs, sim)
	}
	reg, err := channel.NewRegistry(chs...)
	if err != nil {
		return err
	}
	m.channels = reg
	for _, ch := range chs {
		sim := ch.(*channel.Simulator)
		labels := prometheus.Labels{"channel": sim.Code()}
		m.metrics.Registry.MustRegister(
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "payserver_simulator_calls_total", Help: "Payments the channel simulator was asked to make.", ConstLabels: labels,
			}, func() float64 { return float64(sim.Calls()) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "payserver_simulator_duplicate_calls_total", Help: "Simulator calls that repeated a requestId it had already paid (must stay 0).", ConstLabels: labels,
			}, func() float64 { return float64(sim.Duplicates()) }),
		)
	}
	m.log.Info("channels", "simulators", codes)
	return nil
}

func (m *Main) serve(svc *pay.Service) error {
	if m.cfg.AdminToken == "" {
		m.log.Warn("no admin token configured (PAYSERVER_ADMIN_TOKEN); admin routes answer loopback clients only")
	}
	admin, err := m.reportRoutes()
	if err != nil {
		return err
	}
	h, err := httpapi.New(httpapi.Options{
		Pay:        svc,
		Logger:     m.log.With("component", "http"),
		AdminToken: m.cfg.AdminToken,
		Metrics:    promhttp.HandlerFor(m.metrics.Registry, promhttp.HandlerOpts{}),
		Observe:    m.metrics.HTTP,
		Limits:     limitsView{m.limiter, m.manager},
		Admin:      admin,
		Ready: []httpapi.Check{
			{Name: "database", Check: func(ctx context.Context) error { return repo.Ping(ctx, m.db) }},
			{Name: "redis", Check: m.limiter.Ping},
			{Name: "limits", Check: m.manager.Ready},
		},
	})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", m.cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", m.cfg.HTTPAddr, err)
	}
	m.listener = ln
	m.server = &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      m.cfg.ChannelTimeout + 15*time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(m.log.Handler(), slog.LevelWarn),
	}
	m.goBackground(func() {
		if err := m.server.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			m.log.Error("http server stopped", "err", err)
		}
	})
	m.log.Info("payserver listening", "addr", ln.Addr().String())
	return nil
}

type limitsView struct {
	limiter *ratelimit.Limiter
	manager *configcenter.Manager
}

func (v limitsView) Config() *ratelimit.Config   { return v.limiter.Config() }
func (v limitsView) Status() configcenter.Status { return v.manager.Status() }
func (v limitsView) Degraded() bool              { return v.limiter.Degraded() }

// Close drains in-flight requests (up to ShutdownTimeout), stops the
// background loops and closes every connection. It is safe to call more
// than once.
func (m *Main) Close() error {
	var errs []error
	if m.server != nil {
		ctx, cancel := context.WithTimeout(context.Background(), m.cfg.ShutdownTimeout)
		if err := m.server.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("http shutdown: %w", err))
		}
		cancel()
		m.server = nil
	}
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
	if m.mini != nil {
		m.mini.Close()
		m.mini = nil
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
	m.log.Info("payserver stopped")
	return errors.Join(errs...)
}

// startPprof serves net/http/pprof on its own loopback listener when
// PAYSERVER_PPROF_ADDR is set (Validate refuses other hosts).
func (m *Main) startPprof() error {
	if m.cfg.PprofAddr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", m.cfg.PprofAddr)
	if err != nil {
		return fmt.Errorf("pprof listen %s: %w", m.cfg.PprofAddr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index) // also heap, allocs, goroutine, ...
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	m.pprof = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	srv := m.pprof
	m.goBackground(func() { _ = srv.Serve(ln) })
	m.log.Warn("pprof listening; for profiling only", "addr", ln.Addr().String())
	return nil
}

// instanceName identifies this process in shared tables: host and address.
func instanceName(addr string) string {
	host, _ := os.Hostname()
	return host + "/" + addr
}
