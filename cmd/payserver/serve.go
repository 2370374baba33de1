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
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"payserver/internal/channel/gateway"
	"payserver/internal/configcenter"
	"payserver/internal/httpapi"
	"payserver/internal/limits"
	"payserver/internal/pay"
	"payserver/internal/ratelimit"
	"payserver/internal/repo"
)

// This file serves: the HTTP API on its listener, and pprof on its own.

func (m *Main) serve(svc *pay.Service) error {
	if m.cfg.AdminToken == "" {
		m.log.Warn("no admin token configured (PAYSERVER_ADMIN_TOKEN); admin routes answer local requests only")
	}
	if len(m.cfg.API.PayTokens) == 0 {
		m.log.Warn("no pay tokens configured (PAYSERVER_PAY_TOKENS); POST /pay and GET /pay/{requestId} authenticate no caller: keep them reachable from the payment core only")
	}
	opts, err := m.withAdmin(m.withLimitsAPI(httpapi.Options{
		Pay:          svc,
		Logger:       m.log.With("component", "http"),
		AdminToken:   m.cfg.AdminToken,
		Metrics:      promhttp.HandlerFor(m.metrics.Registry, promhttp.HandlerOpts{}),
		Observe:      m.metrics.HTTP,
		Limits:       limitsView{m.limiter, m.manager},
		Learned:      m.limiter,
		Outage:       m.outageView(),
		SchemaBehind: m.schema.Behind,
		Notify: &httpapi.NotifyOptions{Notifier: m.resolver, Keys: m.notifyKeys,
			Nonces: gateway.NewNonceCache(gateway.DefaultNonceCacheSize), Refused: m.messages.Refused},
		Ready: []httpapi.Check{
			{Name: "database", Check: httpapi.Required(func(ctx context.Context) error { return repo.Ping(ctx, m.db) })},
			{Name: "schema", Check: m.schema.Check},
			{Name: "redis", Check: m.redisReadiness()},
			{Name: "limits", Check: httpapi.Required(m.manager.Ready)},
		},
	}))
	if err != nil {
		return err
	}
	h, err := httpapi.New(opts)
	if err != nil {
		return err
	}
	ln := m.listener // bound first, in Run
	m.server = &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      m.cfg.ChannelTimeout + 15*time.Second + ratelimit.MaxWaitCap,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    httpapi.ServerMaxHeaderBytes, // the handler answers JSON 414/431 below it
		ErrorLog:          slog.NewLogLogger(m.log.Handler(), slog.LevelWarn),
	}
	srv := m.server // Close may clear m.server before this goroutine runs
	m.goBackground(func() {
		if err := srv.Serve(httpapi.JSONErrorListener(ln)); err != nil && !errors.Is(err, http.ErrServerClosed) {
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
func (v limitsView) Routes() limits.Routes {
	if d := v.manager.Document(); d != nil {
		return d.Routes
	}
	return nil
}
func (v limitsView) Usage(ctx context.Context, k ratelimit.Key) (ratelimit.Rule, []int64, error) {
	return v.limiter.Usage(ctx, k)
}
func (v limitsView) UsageOf(ctx context.Context, keys []ratelimit.Key) []ratelimit.KeyUsage {
	return v.limiter.UsageOf(ctx, keys)
}

// outageView is what GET /limits and the dashboard show of an outage: the
// admissions decided in process, and Redis's last restart.
type outageView struct {
	limiter  *ratelimit.Limiter
	restarts *redisRestarts // nil without a Redis
}

func (m *Main) outageView() outageView { return outageView{m.limiter, m.restarts} }

func (v outageView) DecidedInProcess(k ratelimit.Key, r ratelimit.Rule) []int64 {
	return v.limiter.DecidedInProcess(k, r)
}

// StoreRestartedAt reads Redis's run id now, within a second.
func (v outageView) StoreRestartedAt(ctx context.Context) time.Time {
	if v.restarts == nil {
		return time.Time{}
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	return v.restarts.Check(ctx)
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
