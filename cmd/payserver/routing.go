package main

import (
	"context"
	"fmt"

	"payserver/internal/breaker"
	"payserver/internal/channel"
	"payserver/internal/configcenter"
	"payserver/internal/console"
	"payserver/internal/limits"
	"payserver/internal/metrics"
	"payserver/internal/pay"
	"payserver/internal/repo"
	"payserver/internal/stats"
)

// This file wires fallback routing: the routes come from the
// limits document in force (configcenter.Manager.Document), the channel
// health breakers from the config, and routing is counted in metrics and
// in route_stats.

// routingWiring is the part of Main that routes payments without a channel.
type routingWiring struct {
	health  *channel.Health
	metrics *metrics.Routes
	counter *stats.RouteCounter
	store   *repo.RouteStats
}

// openRouting builds the channel health breakers, the routing metrics and
// the route stats counter (flushed every stats flush interval). It runs
// once the channels and the database are open.
func (m *Main) openRouting(ctx context.Context) error {
	rm := m.metrics.NewRoutes()
	codes := m.channels.Codes()
	for _, c := range codes {
		rm.BreakerOpen(c, false)
	}
	log := m.log.With("component", "routing")
	health := channel.NewHealth(codes, channel.HealthOptions{
		Failures: int(m.cfg.Routing.BreakerFailures), Cooldown: m.cfg.Routing.BreakerCooldown, Probes: int(m.cfg.Routing.BreakerProbes),
		OnStateChange: func(code string, from, to breaker.State) {
			rm.BreakerOpen(code, to == breaker.Open)
			log.Warn("channel health changed; routed payments skip an open channel", "channel", code, "from", from.String(), "to", to.String())
		},
	})
	store, err := repo.NewRouteStats(m.db)
	if err != nil {
		return err
	}
	counter, err := stats.NewRouteCounter(store, nil, log)
	if err != nil {
		return err
	}
	m.routing = routingWiring{health: health, metrics: rm, counter: counter, store: store}
	m.goBackground(func() { counter.Run(ctx, m.cfg.Stats.FlushInterval) })
	return nil
}

// drainRouting writes the pending route stats at shutdown.
func (m *Main) drainRouting() error {
	if m.routing.counter == nil || m.db == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), statsDrainTimeout)
	defer cancel()
	if err := m.routing.counter.Drain(ctx); err != nil {
		return fmt.Errorf("final route stats flush: %w", err)
	}
	return nil
}

// checkRoutes refuses a limits document whose routes name a channel this
// server does not have (Manager's Check).
func (m *Main) checkRoutes(d *limits.Document) error {
	return d.CheckRouteChannels(func(code string) bool {
		_, ok := m.channels.Get(code)
		return ok
	})
}

// payRouting returns the routing options of the payment service.
func (m *Main) payRouting() (pay.RouteTable, pay.ChannelHealth, pay.RouteObserver) {
	return routeTable{limits: m.manager, source: m.limitsSourceKind()}, m.routing.health, routeObserver{metrics: m.routing.metrics, counter: m.routing.counter}
}

// routeReports returns the routing reports, for GET /reports/routes and
// the dashboard.
func (m *Main) routeReports() (*console.RouteReports, error) {
	return console.NewRouteReports(console.RouteReportsOptions{
		Rows: m.routing.store, Usage: m.limiter, Health: m.routing.health,
		Flush: m.routing.counter.Flush, Logger: m.log.With("component", "route-reports"),
	})
}

// routeTable reads the routes of the limits document in force, which the
// config center holds; before the first one it answers
// pay.LimitsNotLoaded naming source, as the limiter does.
type routeTable struct {
	limits *configcenter.Manager
	source string
}

func (t routeTable) Route(bizType string) ([]string, error) {
	select {
	case <-t.limits.Loaded():
	default:
		return nil, pay.LimitsNotLoaded(t.source)
	}
	return t.limits.Document().Route(bizType), nil
}

// routeObserver counts routing in the metrics and the route stats.
type routeObserver struct {
	metrics *metrics.Routes
	counter *stats.RouteCounter
}

func (o routeObserver) Routed(bizType, ch string, skipped []pay.RouteSkip) {
	o.metrics.Routed(bizType, ch, skipped)
	o.counter.Count(bizType, "", ch, "")
	for _, s := range skipped {
		o.counter.Count(bizType, s.Channel, ch, s.Reason)
	}
}

func (o routeObserver) Exhausted(bizType string, skipped []pay.RouteSkip) {
	o.metrics.Exhausted(bizType, skipped)
	for _, s := range skipped {
		o.counter.Count(bizType, s.Channel, "", s.Reason)
	}
}
