package metrics

import "github.com/prometheus/client_golang/prometheus"

// Auth counts failed authentications and the refusals of addresses that
// failed too often. It implements authguard.Observer.
type Auth struct {
	failed, refused *prometheus.CounterVec
}

// NewAuth registers the authentication counters.
func (m *Metrics) NewAuth() *Auth {
	a := &Auth{
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payserver_auth_failures_total",
			Help: "Failed authentications that presented a credential, by surface (admin, login, client, grpc).",
		}, []string{"surface"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payserver_auth_throttled_total",
			Help: "Requests refused (429 AUTH_THROTTLED, gRPC RESOURCE_EXHAUSTED) because their address failed to authenticate 10 times within a minute, by surface.",
		}, []string{"surface"}),
	}
	m.Registry.MustRegister(a.failed, a.refused)
	return a
}

// AuthFailed implements authguard.Observer.
func (a *Auth) AuthFailed(surface string) { a.failed.WithLabelValues(surface).Inc() }

// AuthRefused implements authguard.Observer.
func (a *Auth) AuthRefused(surface string) { a.refused.WithLabelValues(surface).Inc() }
