package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"payserver/internal/channel"
	"payserver/internal/channel/gateway"
	"payserver/internal/configcenter"
	"payserver/internal/limitapi"
	"payserver/internal/metrics"
	"payserver/internal/pay"
	"payserver/internal/ratelimit"
	"payserver/internal/ratelimit/redisstore"
	"payserver/internal/repo"
)

// This file builds the services on top of the opened backends: the limiter,
// the limits source, the channels and the payment service.

// buildLimiter makes the limiter's store, the Redis store (scripts loaded
// before the first check) or, embedded, the journaled in-process store, and
// the limiter around it.
func (m *Main) buildLimiter(ctx context.Context) error {
	store, err := m.limiterStore(ctx)
	if err != nil {
		return err
	}
	m.limiter, err = ratelimit.New(store, m.limiterOptions(ctx))
	if err != nil {
		return err
	}
	m.api.metrics.WatchWaiters(m.limiter.Waiters)
	m.learned = m.metrics.NewLearnedLimits(m.limiter, m.log.With("component", "learned-limits"))
	m.goBackground(func() { m.learned.Run(ctx, metrics.LearnedRefresh) })
	m.goBackground(func() { m.limiter.RunWindowRegistry(ctx) })
	return nil
}

// limiterOptions are the limiter's settings and what it tells. POST /pay,
// the resolver and the limits service call the limiter itself; these make
// it:
//   - refuse every check and peek with 503 naming the limits source until
//     the first limits document is in force (fail-safe start);
//   - wait for room when a request asks to (maxWaitMs), with
//     PAYSERVER_LIMIT_MAX_WAITERS waiters per key;
//   - count the checks of POST /pay and the resolver under
//     limitapi.PayCaller beside the limits service's clients;
//   - record every decision in the decision log (what-if), owned by ctx.
func (m *Main) limiterOptions(ctx context.Context) ratelimit.Options {
	source := m.limitsSourceKind()
	return ratelimit.Options{
		Timeout:          m.cfg.Limiter.Timeout,
		Policy:           m.cfg.Limiter.Policy,
		LocalShare:       m.cfg.LocalShare(),
		DisableNearCache: !m.cfg.Limiter.NearCache,
		Logger:           m.log.With("component", "limiter"),
		Observer:         ratelimit.MultiObserver(m.metrics, m.stats.agg, m.decisionObserver(ctx)),
		NotLoaded:        func() error { return pay.LimitsNotLoaded(source) },
		MaxWaiters:       m.cfg.API.MaxWaiters,
		WaitObserver:     m.api.metrics,
		Checks:           limitapi.CheckCounter{Observer: m.api.obs},
	}
}

// limiterStore opens the store the limiter decides on.
func (m *Main) limiterStore(ctx context.Context) (ratelimit.Store, error) {
	if m.redis == nil {
		durable, err := ratelimit.OpenDurableStore(m.limiterJournal(), nil)
		if err != nil {
			return nil, err
		}
		m.durable = durable
		return durable, nil
	}
	store, err := redisstore.New(m.redis, redisstore.Options{
		Coalesce: m.cfg.Limiter.Coalesce,
		MaxBatch: m.cfg.Limiter.MaxBatch,
	})
	if err != nil {
		return nil, err
	}
	if m.cfg.Limiter.Coalesce {
		m.metrics.WatchCoalescer(store.CoalesceStats)
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	if err := store.Warm(wctx); err != nil {
		m.log.Warn("limiter scripts not loaded at start; checks degrade until Redis answers", "err", err)
	}
	cancel()
	return store, nil
}

// buildPay makes the order store, the ledger of slots whose fate is not
// known yet and the payment service, and starts the sweeper of stale
// orders and the ledger's workers. The limits API shares the ledger.
func (m *Main) buildPay(ctx context.Context) (*pay.Service, *pay.Ledger, error) {
	orders, err := repo.NewOrdersWithOptions(m.db, repo.OrdersOptions{
		GroupCommit: m.cfg.DBGroupCommit, BatchGets: m.cfg.DBBatchReads, MaxBatch: m.cfg.DBMaxBatch,
	})
	if err != nil {
		return nil, nil, err
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
	routes, health, routed := m.payRouting()
	instrumented := m.metrics.InstrumentOrders(orders)
	staleAfter := m.cfg.OrderStaleAfter
	if staleAfter <= 0 {
		staleAfter = pay.DefaultStaleAfter(m.cfg.ChannelTimeout)
	}
	sweep := 30 * time.Second
	if m.cfg.OrderStaleAfter > 0 {
		sweep = min(sweep, max(m.cfg.OrderStaleAfter/2, 100*time.Millisecond))
	}
	// One ledger keeps every slot whose fate a request, the resolver, a
	// notification or a limits API acquire could not carry out at once
	// (a lost acquire's grace is limitapi.LostAnswerGrace), journaled in the data
	// directory; the files of the earlier lost-answers and owed-releases
	// directories are moved into it once. It stops with the background
	// loops, before the database closes (release).
	ledger, err := pay.NewLedger(instrumented, m.limiter, pay.LedgerOptions{
		Dir:      filepath.Join(m.cfg.DataDir, "ledger"),
		Migrate:  []string{filepath.Join(m.cfg.DataDir, "lost-answers"), filepath.Join(m.cfg.DataDir, "owed-releases")},
		Grace:    m.cfg.LostAnswerGrace,
		Observer: m.metrics.NewLedger(),
		Logger:   m.log.With("component", "ledger"),
	})
	if err != nil {
		return nil, nil, err
	}
	m.metrics.WatchLedger(ledger.Sizes)
	m.goBackground(func() { ledger.Run(ctx) })
	svc, err := pay.NewService(instrumented, m.limiter, m.channels, pay.Options{
		ChannelTimeout: m.cfg.ChannelTimeout,
		StaleAfter:     staleAfter,
		Ledger:         ledger,
		Routes:         routes,
		Health:         health,
		RouteObserver:  routed,
		Throttles:      m.metrics.NewThrottles(m.channelCodes()),
		Logger:         m.log.With("component", "pay"),
	})
	if err != nil {
		return nil, nil, err
	}
	if err := m.buildResolver(ctx, orders, m.limiter, ledger); err != nil {
		return nil, nil, err
	}
	m.goBackground(func() { svc.RunSweeper(ctx, sweep) })
	return svc, ledger, nil
}

// startLimits picks the limits source (Nacos when an address is set, else
// the watched file), starts it, and waits briefly for the first document.
func (m *Main) startLimits(ctx context.Context) error {
	var src configcenter.Source
	if len(m.cfg.Nacos.Addrs) > 0 {
		ns, err := configcenter.NewNacosSource(configcenter.NacosOptions{
			Addrs: m.cfg.Nacos.Addrs, Namespace: m.cfg.Nacos.Namespace,
			Group: m.cfg.Nacos.Group, DataID: m.cfg.Nacos.DataID,
			Username: m.cfg.Nacos.Username, Password: m.cfg.Nacos.Password,
			CacheDir: filepath.Join(m.cfg.DataDir, "nacos", "cache"),
			LogDir:   filepath.Join(m.cfg.DataDir, "nacos", "log"),
			Logger:   m.log.With("component", "nacos"), LogLevel: m.cfg.LogLevel,
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
		m.learned.Kick()
	})
	watched := configcenter.Watch(src)
	src = watched
	history, err := repo.NewLimitHistory(m.db, instanceName(m.cfg.HTTPAddr))
	if err != nil {
		return err
	}
	mgr, err := configcenter.NewManager(src, applier, configcenter.ManagerOptions{
		Logger:       m.log.With("component", "limits"),
		History:      history,
		LastGoodPath: filepath.Join(m.cfg.DataDir, "limits", "last-good.yaml"),
		Hooks:        configcenter.Hooks{Applied: m.metrics.ConfigApplied, Refused: m.metrics.ConfigRefused, Document: m.documentApplied},
		Check:        m.checkRoutes,
	})
	if err != nil {
		return err
	}
	m.manager = mgr
	m.watchOps(watched)
	m.log.Info("limits source", "source", src.Describe())
	m.goBackground(func() {
		if err := mgr.Run(ctx); err != nil {
			m.log.Error("limits source stopped", "err", err)
		}
	})
	select {
	case <-mgr.Loaded():
	case <-time.After(3 * time.Second):
		const until = "until a valid document arrives every payment is refused with 503 and /readyz is not ready"
		if st := mgr.Status(); st.LastRefusal != "" {
			m.log.Warn("no limits loaded after 3s: the limits document was refused; "+until,
				"source", src.Describe(), "refusal", st.LastRefusal)
		} else {
			m.log.Warn("no limits loaded after 3s (no document, no server, no snapshot); "+until, "source", src.Describe())
		}
	}
	return nil
}

// limitsSourceKind names the limits source in errors: "nacos" or "file".
func (m *Main) limitsSourceKind() string {
	if len(m.cfg.Nacos.Addrs) > 0 {
		return "nacos"
	}
	return "file"
}

type applierFunc func(*ratelimit.Config)

func (f applierFunc) SetConfig(c *ratelimit.Config) { f(c) }

// channelCodes returns the codes of the configured channels, sorted.
func (m *Main) channelCodes() []string {
	codes := make([]string, 0, len(m.cfg.Channels))
	for code := range m.cfg.Channels {
		codes = append(codes, code)
	}
	sort.Strings(codes)
	return codes
}

func (m *Main) openChannels() error {
	codes := m.channelCodes()
	chs := make([]channel.Channel, 0, len(codes))
	var sims, gateways []string
	m.messages = m.metrics.NewChannelMessages(codes)
	for _, code := range codes {
		if gc, ok := m.cfg.gatewayOf(code); ok {
			gc.Refused = func(r gateway.Reason) { m.messages.Refused(code, r) }
			gw, err := gateway.NewChannel(gc, m.log.With("component", "gateway", "channel", code), nil)
			if err != nil {
				return err
			}
			m.gateways = append(m.gateways, gw)
			chs = append(chs, gw)
			gateways = append(gateways, code+" "+gc.BaseURL)
			continue
		}
		sim, err := channel.NewSimulator(code, m.cfg.Channels[code].SimulatorConfig)
		if err != nil {
			return err
		}
		m.watchSimulator(sim)
		chs = append(chs, sim)
		sims = append(sims, code)
	}
	reg, err := channel.NewRegistry(chs...)
	if err != nil {
		return err
	}
	m.channels = reg
	m.log.Info("channels", "simulators", sims, "gateways", gateways)
	if shared := m.cfg.sharedKeyChannels(); len(shared) > 1 {
		m.log.Warn("channels share one signing key (PAYSERVER_CHANNEL_GATEWAY_SECRET): give each its own channels.CODE.gateway.keys",
			"channels", shared)
	}
	return nil
}

// notifyKeys returns the keys of a channel served by a gateway, which
// sign its notifications; false for a simulator.
func (m *Main) notifyKeys(code string) (gateway.Keys, bool) {
	if _, ok := m.cfg.Channels[code]; !ok {
		return nil, false
	}
	gc, ok := m.cfg.gatewayOf(code)
	return gc.Keys, ok
}

// watchSimulator registers a simulator's call counters.
func (m *Main) watchSimulator(sim *channel.Simulator) {
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

// resolverOwner names this process in the resolver's leases: host/addr/pid,
// cut to pay.MaxOwnerLen with a hash of the whole kept, so that two long
// names stay apart.
func resolverOwner(instance string, pid int) string {
	name := fmt.Sprintf("%s/%d", instance, pid)
	if len(name) <= pay.MaxOwnerLen {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return name[:pay.MaxOwnerLen-17] + "~" + hex.EncodeToString(sum[:8])
}

// buildResolver makes the resolver of unknown outcomes and starts it.
func (m *Main) buildResolver(ctx context.Context, orders *repo.Orders, limiter pay.Limiter, ledger *pay.Ledger) error {
	r, err := pay.NewResolver(orders, limiter, m.channels, pay.ResolverOptions{
		Ledger:      ledger,
		Owner:       resolverOwner(instanceName(m.cfg.HTTPAddr), os.Getpid()),
		Backoff:     m.cfg.Resolver.Backoff,
		MaxBackoff:  m.cfg.Resolver.MaxBackoff,
		CallTimeout: m.cfg.ChannelTimeout,
		Observer:    m.metrics.NewResolver(m.channelCodes()),
		Logger:      m.log.With("component", "resolver"),
		Rules: func(code string) pay.UnknownRules {
			return m.cfg.Channels[code].UnknownOutcome.rules(m.cfg.Resolver.Backoff)
		},
	})
	if err != nil {
		return err
	}
	m.resolver, m.orders = r, orders
	m.goBackground(func() { r.Run(ctx) })
	return nil
}
