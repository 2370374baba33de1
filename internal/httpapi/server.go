// Package httpapi is payserver's HTTP API: payments, the limits API, the
// admin JSON routes, health, and what every route shares (middleware,
// admin and client authentication, the one error body and the one JSON
// writer). It decodes requests, calls the domain services and turns their
// results and errors into JSON answers. The operators' console
// (internal/console) is served beside it through Options.Console.
package httpapi

import (
	"context"
	"errors"
	"html/template"
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"payserver/internal/apperr"
	"payserver/internal/authguard"
	"payserver/internal/pay"
	"payserver/internal/ratelog"
)

// Request size limits. Over MaxBodyBytes a body is 413 BODY_TOO_LARGE,
// a request target (path and query) over MaxURIBytes is 414 URI_TOO_LONG,
// and header fields over MaxHeaderBytes in all are 431 HEADERS_TOO_LARGE,
// all with the JSON error body (see also ServerMaxHeaderBytes).
const (
	MaxBodyBytes   = 64 << 10
	MaxURIBytes    = 8 << 10
	MaxHeaderBytes = 16 << 10
)

// PayService is what the pay routes need. *pay.Service implements it.
type PayService interface {
	Pay(ctx context.Context, req pay.PayRequest) (*pay.Order, error)
	Get(ctx context.Context, requestID string) (*pay.Order, error)
}

// Check is one readiness check of GET /readyz.
type Check struct {
	Name string
	// Check says whether the named thing lets the instance take traffic.
	// Required turns a function returning an error into one.
	Check func(ctx context.Context) Readiness
}

// Readiness is one check's answer. The zero value is ready and shown as
// "ok".
type Readiness struct {
	// NotReady takes the instance out of traffic: /readyz answers 503 and
	// names the check in missing.
	NotReady bool
	// Text is shown under the check's name; empty shows "ok". A ready
	// answer with a text says the instance serves in a degraded way (a
	// dependency it decides without, a newer schema it is compatible with).
	Text string
}

// Required is the check of something the instance cannot serve without:
// ready ("ok") when check returns nil, else not ready, shown by the
// error's text.
func Required(check func(ctx context.Context) error) func(ctx context.Context) Readiness {
	return func(ctx context.Context) Readiness {
		if err := check(ctx); err != nil {
			return Readiness{NotReady: true, Text: err.Error()}
		}
		return Readiness{}
	}
}

// Options wires the handler. Pay and Logger are required.
type Options struct {
	Pay    PayService
	Logger *slog.Logger
	// Ready lists what GET /readyz checks.
	Ready []Check
	// AdminToken, when set, is required as "Authorization: Bearer …" on admin
	// routes, or given once on the login form (POST /dashboard/login) for a
	// browser session cookie. When empty, admin routes answer only loopback
	// clients and there is no login.
	AdminToken string
	// Metrics serves GET /metrics (admin); nil leaves the route out.
	Metrics http.Handler
	// Observe, when set, is told of every answered request.
	Observe func(route string, status int, method string, seconds float64)
	// Limits serves GET /limits (admin); nil leaves the route out.
	Limits LimitsView
	// Learned, when set, adds each window's learned limit (from the
	// channel's throttles) to GET /limits. *ratelimit.Limiter implements
	// it.
	Learned LearnedSource
	// Outage, when set, adds to GET /limits what each window's use may
	// leave out after an outage: the admissions decided in process, and
	// when Redis restarted.
	Outage OutageView
	// Admin registers more admin routes of this package (the limits
	// history, the learned limits reset, what-if) on the group, which
	// already enforces admin auth.
	Admin []func(g *gin.RouterGroup)
	// Console, when set, serves the console's routes (Console.Routes)
	// behind admin auth: the dashboard and the reports.
	Console Console
	// LimitsAPI serves /v1/limits (client tokens); nil leaves it out.
	LimitsAPI LimitsAPI
	// ClientTokens are the callers of /v1/limits.
	ClientTokens []ClientToken
	// Notify serves POST /channels/{code}/notify; nil leaves it out.
	Notify *NotifyOptions
	// SchemaBehind, when set, turns POST /pay's and GET /pay's 503 for
	// the order database into one that names `payserver migrate` while the
	// schema is behind.
	SchemaBehind SchemaBehind
	// Now is the clock GET /limits tells active schedules by, and
	// notification signatures are checked by. Default time.Now.
	Now func() time.Time
	// PayTokens, when set, are the callers of POST /pay and GET
	// /pay/{requestId} (PAYSERVER_PAY_TOKENS): a call without one of them
	// as a bearer token is 401. Empty: the payment routes authenticate no
	// one (they must be reachable from the payment core only).
	PayTokens []ClientToken
	// AuthGuard counts failed authentications per address (admin bearer
	// token, dashboard login, client tokens) and refuses an address past
	// its budget with 429 AUTH_THROTTLED. Share one with the gRPC service.
	// Default: a guard of the handler's own on Now.
	AuthGuard *authguard.Guard
}

// New returns the HTTP handler.
func New(opts Options) (http.Handler, error) {
	if opts.Pay == nil || opts.Logger == nil {
		return nil, errors.New("httpapi: nil pay service or logger")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Notify != nil && (opts.Notify.Keys == nil || opts.Notify.Nonces == nil) {
		return nil, errors.New("httpapi: notifications without keys or a nonce cache")
	}
	if opts.AuthGuard == nil {
		opts.AuthGuard = authguard.New(authguard.Options{Now: opts.Now})
	}
	loginTmpl, err := parseLoginTemplate()
	if err != nil {
		return nil, err
	}
	h := &handler{opts: opts, log: opts.Logger, authLog: newAuthLog(), clientAuthLog: newAuthLog(), clients: newClientTokens(opts.ClientTokens),
		payCallers: newClientTokens(opts.PayTokens),
		sessions:   newAdminSessions(opts.Now), loginTmpl: loginTmpl, console: newConsoleRoutes(opts.Console)}
	r := gin.New()
	// No proxy is trusted: X-Forwarded-For never names the peer
	// (c.ClientIP is the connection's address), in logs or anywhere.
	if err := r.SetTrustedProxies(nil); err != nil {
		return nil, err
	}
	r.HandleMethodNotAllowed = true
	// Route on the escaped path, so that an escaped slash stays inside its
	// segment: GET /pay/a%2Fb is requestId "a/b" (400, malformed), not a
	// path with one more segment (404 NOT_FOUND).
	r.UseRawPath = true
	r.ContextWithFallback = true
	r.Use(nosniff, h.recover, h.observe, h.limitHeader, h.limitBody, h.checkPublic)
	r.NoRoute(func(c *gin.Context) {
		if c.Request.URL.Path == "/" && c.Request.Method != http.MethodGet {
			// "/" is documented for GET only (a browser is sent on to the
			// dashboard): any other method is not allowed there.
			c.Header("Allow", http.MethodGet)
			WriteError(c, h.log, apperr.New(apperr.MethodNotAllowed, "method %s is not allowed here", c.Request.Method), "")
			return
		}
		if c.Request.Method == http.MethodGet && c.Request.URL.Path == "/" && acceptsHTML(c.Request) {
			c.Redirect(http.StatusFound, "/dashboard") // a browser opening the server's address
			return
		}
		WriteError(c, h.log, apperr.New(apperr.NotFound, "no route %s %s", c.Request.Method, c.Request.URL.Path), "")
	})
	r.NoMethod(func(c *gin.Context) {
		WriteError(c, h.log, apperr.New(apperr.MethodNotAllowed, "method %s is not allowed here", c.Request.Method), "")
	})
	if len(opts.PayTokens) > 0 {
		r.POST("/pay", h.authThrottle, h.requirePayCaller, h.postPay)
		r.GET("/pay/:requestId", h.authThrottle, h.requirePayCaller, h.getPay)
	} else {
		r.POST("/pay", h.postPay)
		r.GET("/pay/:requestId", h.getPay)
	}
	if opts.Notify != nil {
		r.POST("/channels/:code/notify", h.postNotify)
	}
	r.GET("/healthz", h.healthz)
	r.GET("/readyz", h.readyz)
	if opts.AdminToken != "" {
		h.registerLogin(r)
	}
	public := routeSet(r.Routes())
	admin := r.Group("/", h.authThrottle, h.adminAuth, h.checkRequest)
	if opts.Metrics != nil {
		admin.GET("/metrics", gin.WrapH(opts.Metrics))
	}
	if opts.Limits != nil {
		admin.GET("/limits", h.getLimits)
	}
	for _, register := range opts.Admin {
		register(admin)
	}
	if opts.Console != nil {
		h.registerConsole(admin)
	}
	if opts.LimitsAPI != nil {
		h.registerV1(r)
	}
	h.authenticated = map[string]bool{}
	for id := range routeSet(r.Routes()) {
		if !public[id] {
			h.authenticated[id] = true
		}
	}
	return r, nil
}

// now reads the handler's clock.
func (h *handler) now() time.Time { return h.opts.Now() }

type handler struct {
	opts          Options
	log           *slog.Logger
	authLog       *ratelog.Limiter // failed admin authentications
	clientAuthLog *ratelog.Limiter // failed client-token authentications
	clients       clientTokens
	payCallers    clientTokens   // PayTokens
	sessions      *adminSessions // browser logins (admin_session.go)
	// authenticated are the routes ("METHOD /path") behind admin or client
	// authentication, which check their requests after it (checkRequest);
	// checkPublic checks every other route's.
	authenticated map[string]bool
	loginTmpl     *template.Template
	console       consoleRoutes
}

// SetReleaseMode puts gin in release mode: no debug lines on start.
// gin's mode is process-wide; cmd/payserver sets it once.
func SetReleaseMode() { gin.SetMode(gin.ReleaseMode) }
