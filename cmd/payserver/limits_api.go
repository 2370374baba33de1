package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"

	"payserver/internal/authguard"
	"payserver/internal/grpcapi"
	"payserver/internal/httpapi"
	"payserver/internal/limitapi"
	"payserver/internal/metrics"
	"payserver/internal/ratelimit"
)

// APIConfig configures the limiter as a service for other callers
// (/v1/limits over HTTP, Envoy's rate limit protocol over gRPC). It is read
// from the environment, and the clients also from the settings file
// (clients, with their scopes).
type APIConfig struct {
	// ClientTokens are the callers of /v1/limits and gRPC:
	// PAYSERVER_CLIENT_TOKENS, "name=token,name=token", and the settings
	// file's clients.
	ClientTokens []httpapi.ClientToken
	// GRPCAddr serves the rate limit service; empty (the default) is off.
	GRPCAddr string // PAYSERVER_GRPC_ADDR
	// MaxWaiters bounds the requests waiting (maxWaitMs) for one key on
	// one instance. PAYSERVER_LIMIT_MAX_WAITERS, default 100.
	MaxWaiters int
	// PayTokens are the callers of POST /pay and GET /pay/{requestId}:
	// PAYSERVER_PAY_TOKENS, "name=token,name=token". Empty: the payment
	// routes authenticate no one.
	PayTokens []httpapi.ClientToken
	// Scopes are the bizTypes each client of the settings file may use;
	// the clients of PAYSERVER_CLIENT_TOKENS are not in it (every
	// bizType).
	Scopes map[string][]string
	// Unscoped names the clients that may use every bizType.
	Unscoped []string
	// GRPCFailureModeDeny says the gateway calling the gRPC service is
	// set to refuse a request when the service fails (Envoy's
	// failure_mode_deny true); default false, Envoy's default, which lets
	// it through. PAYSERVER_GRPC_FAILURE_MODE_DENY.
	GRPCFailureModeDeny bool
}

// ClientConfig is a client of the limits service in the settings file
// (YAML clients.<name>): its token, and the bizTypes it may acquire and
// release (at least one).
type ClientConfig struct {
	Token    string   `yaml:"token"`
	BizTypes []string `yaml:"bizTypes"`
}

// loadAPIConfig reads the APIConfig from the environment and the clients
// of the settings file. Client tokens must differ from the admin token and
// from each other, and client names are unique across both sources. An
// error names a setting as label names it (nil: by its variable), so that
// one read from the settings file is named by its key there.
func loadAPIConfig(getenv func(string) string, label func(string) string, adminToken string, fileClients map[string]ClientConfig) (APIConfig, error) {
	if label == nil {
		label = func(name string) string { return name }
	}
	c := APIConfig{GRPCAddr: strings.TrimSpace(getenv("PAYSERVER_GRPC_ADDR")), MaxWaiters: ratelimit.DefaultMaxWaiters}
	if v := strings.TrimSpace(getenv("PAYSERVER_LIMIT_MAX_WAITERS")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100_000 {
			return APIConfig{}, fmt.Errorf("%s %q: want a whole number in 1..100000", label("PAYSERVER_LIMIT_MAX_WAITERS"), v)
		}
		c.MaxWaiters = n
	}
	switch v := strings.TrimSpace(getenv("PAYSERVER_GRPC_FAILURE_MODE_DENY")); v {
	case "", "false":
	case "true":
		c.GRPCFailureModeDeny = true
	default:
		return APIConfig{}, fmt.Errorf("%s %q: want true or false", label("PAYSERVER_GRPC_FAILURE_MODE_DENY"), v)
	}
	if c.GRPCAddr != "" {
		if _, _, err := net.SplitHostPort(c.GRPCAddr); err != nil {
			return APIConfig{}, fmt.Errorf("%s %q: want host:port", label("PAYSERVER_GRPC_ADDR"), c.GRPCAddr)
		}
	}
	set := newClientSet(adminToken)
	if err := set.parseEnv(getenv("PAYSERVER_CLIENT_TOKENS")); err != nil {
		return APIConfig{}, fmt.Errorf("%s: %w", label("PAYSERVER_CLIENT_TOKENS"), err)
	}
	for _, t := range set.clients {
		c.Unscoped = append(c.Unscoped, t.Name)
	}
	names := make([]string, 0, len(fileClients))
	for name := range fileClients {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fc := fileClients[name]
		where := "clients." + name
		if !validClientName(name) {
			where = "clients: an entry"
		}
		if err := set.add(name, fc.Token); err != nil {
			return APIConfig{}, fmt.Errorf("%s: %w", where, err)
		}
		if len(fc.BizTypes) == 0 {
			return APIConfig{}, fmt.Errorf("%s: bizTypes: list the bizTypes the client may use (a client of every bizType belongs in PAYSERVER_CLIENT_TOKENS)", where)
		}
		for _, b := range fc.BizTypes {
			if p := ratelimit.BizTypeProblem(b); p != "" {
				return APIConfig{}, fmt.Errorf("%s: bizTypes: %.40q %s", where, b, p)
			}
		}
		if c.Scopes == nil {
			c.Scopes = map[string][]string{}
		}
		c.Scopes[name] = fc.BizTypes
	}
	c.ClientTokens = set.clients
	// Pay tokens follow the same rules, and are no client's nor the
	// admin's: each token opens one surface.
	paySet := newClientSet(adminToken)
	for t := range set.tokens {
		paySet.tokens[t] = true
	}
	if err := paySet.parseEnv(getenv("PAYSERVER_PAY_TOKENS")); err != nil {
		return APIConfig{}, fmt.Errorf("%s: %w", label("PAYSERVER_PAY_TOKENS"), err)
	}
	c.PayTokens = paySet.clients
	return c, nil
}

// minClientTokenLen is the shortest client token accepted.
const minClientTokenLen = 16

// maxClientNameLen is the longest client name: shorter than the shortest
// token, so that an entry written the wrong way round (token=name) never
// parses.
const maxClientNameLen = minClientTokenLen - 1

// clientSet collects the clients of every source, names and tokens unique.
type clientSet struct {
	adminToken    string
	clients       []httpapi.ClientToken
	names, tokens map[string]bool
}

func newClientSet(adminToken string) *clientSet {
	return &clientSet{adminToken: adminToken, names: map[string]bool{}, tokens: map[string]bool{}}
}

// parseEnv adds the clients of "name=token,name=token". The error never
// quotes a token.
func (cs *clientSet) parseEnv(s string) error {
	for i, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, token, ok := strings.Cut(part, "=")
		if !ok {
			return fmt.Errorf("entry %d: want name=token", i+1)
		}
		if err := cs.add(name, token); err != nil {
			if validClientName(name) {
				return fmt.Errorf("entry %d (%s): %w (entries are name=token)", i+1, name, err)
			}
			return fmt.Errorf("entry %d: %w (entries are name=token)", i+1, err)
		}
	}
	return nil
}

// add adds one client. Names are 1..15 characters of [A-Za-z0-9_.-] and
// not "pay" (POST /pay's own caller name); tokens are at least 16
// characters without whitespace or commas. The error quotes no token, nor
// a name that is not valid (an entry written the wrong way round, or with
// a wrong separator, carries a token there).
func (cs *clientSet) add(name, token string) error {
	switch {
	case !validClientName(name):
		return fmt.Errorf("the name must be 1..%d characters of A-Z, a-z, 0-9, _ . -", maxClientNameLen)
	case name == limitapi.PayCaller:
		return fmt.Errorf("name %q is reserved for POST /pay's own acquisitions", name)
	case cs.names[name]:
		return fmt.Errorf("name %q given twice", name)
	case len(token) < minClientTokenLen || strings.ContainsAny(token, " \t\r\n,"):
		return fmt.Errorf("the token must be at least %d characters, without spaces or commas", minClientTokenLen)
	case token == cs.adminToken:
		return errors.New("a client token must not be the admin token")
	case cs.tokens[token]:
		return errors.New("the token is another client's")
	}
	cs.names[name], cs.tokens[token] = true, true
	cs.clients = append(cs.clients, httpapi.ClientToken{Name: name, Token: token})
	return nil
}

// parseClientTokens parses PAYSERVER_CLIENT_TOKENS alone.
func parseClientTokens(s, adminToken string) ([]httpapi.ClientToken, error) {
	cs := newClientSet(adminToken)
	if err := cs.parseEnv(s); err != nil {
		return nil, err
	}
	return cs.clients, nil
}

func validClientName(s string) bool {
	if len(s) < 1 || len(s) > maxClientNameLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

// apiWiring is the part of Main that serves the limiter to other callers.
type apiWiring struct {
	// authGuard counts failed authentications per address, shared by the
	// HTTP API and the gRPC service.
	authGuard *authguard.Guard
	metrics   *metrics.LimitsAPI
	tally     *limitapi.Tally
	obs       limitapi.Observer
	svc       *limitapi.Service
	grpc      *grpc.Server
	grpcLn    net.Listener
	started   time.Time
}

// openLimitsAPI sets up the per-caller counts and the metrics of the
// limits service and of waiting for a slot. It runs before the limiter is
// built: the limiter tells them of waits and of POST /pay's checks
// (limiterOptions).
func (m *Main) openLimitsAPI() {
	am := m.metrics.NewLimitsAPI()
	tally := limitapi.NewTally()
	m.api = apiWiring{tally: tally, metrics: am, obs: limitapi.MultiObserver{am, tally}, started: time.Now().UTC(),
		authGuard: authguard.New(authguard.Options{MaxFailures: m.cfg.AuthMaxFailures, Observer: m.metrics.NewAuth()})}
}

// startLimitsAPI builds the limits service and, when PAYSERVER_GRPC_ADDR is
// set, serves Envoy's rate limit protocol on it. The members of acquires
// whose limiter answer was lost are kept by ledger, POST /pay's, whose
// workers Main runs.
func (m *Main) startLimitsAPI(orders limitapi.OrderFinder, ledger limitapi.Ledger) error {
	// The limiter refuses acquisitions and peeks before the first limits
	// document (limiterOptions), and waits for room itself.
	svc, err := limitapi.NewService(limitapi.Options{Admit: m.limiter, Peek: m.limiter, Release: m.limiter, Orders: orders, Observer: m.api.obs, Scopes: m.cfg.API.Scopes,
		Ledger: ledger})
	if err != nil {
		return err
	}
	m.api.svc = svc
	if len(m.cfg.API.ClientTokens) == 0 {
		m.log.Warn("no client tokens configured (PAYSERVER_CLIENT_TOKENS); /v1/limits and gRPC answer 401 to everyone")
	}
	if len(m.cfg.API.Unscoped) > 0 {
		m.log.Warn("clients without a scope may acquire and release every bizType, POST /pay's included; give each its bizTypes in the settings file (clients)",
			"unscopedClients", m.cfg.API.Unscoped)
	}
	names := make([]string, 0, len(m.cfg.API.ClientTokens))
	for _, c := range m.cfg.API.ClientTokens {
		names = append(names, c.Name)
	}
	m.log.Info("limits service", "clients", names, "grpcAddr", m.cfg.API.GRPCAddr, "maxWaitersPerKey", m.cfg.API.MaxWaiters)
	if m.cfg.API.GRPCAddr == "" {
		return nil
	}
	auth := httpapi.NewClientAuthenticator(m.cfg.API.ClientTokens)
	srv, err := grpcapi.NewServer(svc, auth, m.log.With("component", "grpc"), grpcapi.Options{FailureModeDeny: m.cfg.API.GRPCFailureModeDeny, AuthGuard: m.api.authGuard})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", m.cfg.API.GRPCAddr)
	if err != nil {
		return fmt.Errorf("grpc listen %s: %w", m.cfg.API.GRPCAddr, err)
	}
	g := srv.NewGRPCServer()
	m.api.grpc, m.api.grpcLn = g, ln
	m.goBackground(func() {
		if err := g.Serve(ln); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			m.log.Error("grpc server stopped", "err", err)
		}
	})
	m.log.Info("rate limit service (gRPC) listening", "addr", ln.Addr().String())
	return nil
}

// GRPCAddr returns the address the gRPC server listens on, "" when off.
func (m *Main) GRPCAddr() string {
	if m.api.grpcLn == nil {
		return ""
	}
	return m.api.grpcLn.Addr().String()
}

// withLimitsAPI adds the /v1/limits routes and their client tokens to
// opts.
func (m *Main) withLimitsAPI(opts httpapi.Options) httpapi.Options {
	opts.LimitsAPI = m.api.svc
	opts.ClientTokens = m.cfg.API.ClientTokens
	opts.AuthGuard = m.api.authGuard
	opts.PayTokens = m.cfg.API.PayTokens
	return opts
}

// closeLimitsAPI stops the gRPC server, letting in-flight calls finish up
// to ctx.
func (m *Main) closeLimitsAPI(ctx context.Context) {
	if m.api.grpc == nil {
		return
	}
	done := make(chan struct{})
	go func() {
		m.api.grpc.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		m.api.grpc.Stop()
	}
	m.api.grpc = nil
}
