package main

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strconv"

	"payserver/internal/configcenter"
	"payserver/internal/metrics"
	"payserver/internal/repo"
)

// watchOps exports the gauges deploy/prometheus/alerts.yml alerts on: the
// limiter's share and degraded state, each dependency's readiness, and
// whether the latest limits document from src was refused.
func (m *Main) watchOps(src *configcenter.WatchedSource) {
	m.limitsIn = src
	m.metrics.WatchLimiter(m.limiter.LocalShare, m.limiter.Degraded)
	m.metrics.WatchDependencies(map[string]func(context.Context) error{
		"database": func(ctx context.Context) error { return repo.Ping(ctx, m.db) },
		"redis":    m.limiter.Ping,
		"limits":   m.manager.Ready,
	})
	if m.persistence != nil {
		m.metrics.WatchRedisPersistence(m.persistence.Gauge)
	}
	m.metrics.WatchLimits(func() metrics.LimitsState {
		st, last := m.manager.Status(), src.LastMD5()
		return metrics.LimitsState{Loaded: st.Loaded, RefusedInForce: last != "" && last != st.MD5}
	})
}

// startMembership registers this instance in Nacos naming when Nacos is the
// limits source, so that the local share follows the live instance count
// (PAYSERVER_INSTANCE_COUNT is the floor). Instances reading the same
// limits document (group and dataId) count each other. It runs once the
// HTTP listener is up, so the registered port is the real one. An explicit
// local share (limiter.localShare in the settings file) turns it off.
func (m *Main) startMembership(ctx context.Context) error {
	if len(m.cfg.Nacos.Addrs) == 0 {
		return nil
	}
	if m.cfg.Limiter.LocalShare > 0 {
		m.log.Info("nacos naming not used: limiter.localShare fixes the local share", "share", m.cfg.Limiter.LocalShare)
		return nil
	}
	host, portStr, err := net.SplitHostPort(m.Addr())
	if err != nil {
		return fmt.Errorf("naming: listener address: %w", err)
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return fmt.Errorf("naming: listener port: %w", err)
	}
	gauges := m.metrics.WatchNacos()
	mem, err := configcenter.NewMembership(configcenter.NamingOptions{
		Addrs: m.cfg.Nacos.Addrs, Namespace: m.cfg.Nacos.Namespace,
		Username: m.cfg.Nacos.Username, Password: m.cfg.Nacos.Password,
		Group: m.cfg.Nacos.Group, Service: m.cfg.Nacos.DataID,
		CacheDir: filepath.Join(m.cfg.DataDir, "nacos", "naming-cache"),
		LogDir:   filepath.Join(m.cfg.DataDir, "nacos", "log"),
		Logger:   m.log, LogLevel: m.cfg.LogLevel,
		IP: configcenter.InstanceIP(host), Port: port,
		Floor: m.cfg.Limiter.InstanceCount, Share: m.limiter,
		Contacted: gauges.Contacted, Live: gauges.LiveInstances,
		// The SDK's shutdown races with its other clients' requests:
		// the naming client goes after the limits source's config client.
		CloseAfter: m.limitsIn.Done(),
	})
	if err != nil {
		return err
	}
	m.goBackground(func() {
		if err := mem.Run(ctx); err != nil {
			m.log.Error("nacos naming stopped; the local share stays at 1/PAYSERVER_INSTANCE_COUNT", "err", err)
		}
	})
	return nil
}
