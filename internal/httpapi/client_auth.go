package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"log/slog"

	"github.com/gin-gonic/gin"

	"payserver/internal/apperr"
)

// ClientToken is one caller of the /v1/limits routes: a name that appears in
// logs, metrics and reports, and its secret bearer token, which never does.
type ClientToken struct {
	Name  string
	Token string
}

// LogValue logs the client's name only, never its token.
func (c ClientToken) LogValue() slog.Value { return slog.StringValue(c.Name) }

// String is the client's name only, so that no format verb prints the
// token.
func (c ClientToken) String() string { return c.Name }

// MarshalJSON is the client's name only, as a JSON string.
func (c ClientToken) MarshalJSON() ([]byte, error) { return json.Marshal(c.Name) }

// GoString is the client's name only (the %#v verb).
func (c ClientToken) GoString() string { return "ClientToken(" + c.Name + ")" }

// clientKey is the gin context key of the authenticated client's name.
const clientKey = "payserver.client"

// clientTokens holds the SHA-256 digests of the client tokens, so that
// every comparison is of 32 bytes (a length difference would otherwise
// show in the timing).
type clientTokens struct {
	names   []string
	digests [][32]byte
}

func newClientTokens(list []ClientToken) clientTokens {
	var ct clientTokens
	for _, c := range list {
		ct.names = append(ct.names, c.Name)
		ct.digests = append(ct.digests, sha256.Sum256([]byte(c.Token)))
	}
	return ct
}

// match returns the name of the client whose token is token. Every token
// is compared, in constant time, whichever matches.
func (ct clientTokens) match(token string) (string, bool) {
	got := sha256.Sum256([]byte(token))
	found := -1
	for i, d := range ct.digests {
		if subtle.ConstantTimeCompare(got[:], d[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return "", false
	}
	return ct.names[found], true
}

// requireClient guards the /v1/limits routes: the request must carry one of
// the client tokens (PAYSERVER_CLIENT_TOKENS) as a bearer token. The admin
// token is not one. With no client token configured, every call is 401.
func (h *handler) requireClient(c *gin.Context) {
	token, ok := bearerToken(c.GetHeader("Authorization"))
	name, known := h.clients.match(token)
	if !ok || !known || token == "" {
		c.Header("WWW-Authenticate", `Bearer realm="payserver-limits"`)
		h.logClientAuthFailure(c)
		if token != "" {
			h.opts.AuthGuard.Failed(c.Request.RemoteAddr, "client")
		}
		WriteError(c, h.log, apperr.New(apperr.Unauthorized, "a valid client bearer token is required (PAYSERVER_CLIENT_TOKENS)"), "")
		return
	}
	c.Set(clientKey, name)
}

// requirePayCaller guards the payment routes when pay tokens are
// configured (Options.PayTokens): the request must carry one as a bearer
// token.
func (h *handler) requirePayCaller(c *gin.Context) {
	token, ok := bearerToken(c.GetHeader("Authorization"))
	_, known := h.payCallers.match(token)
	if !ok || !known || token == "" {
		c.Header("WWW-Authenticate", `Bearer realm="payserver-pay"`)
		if logOK, suppressed := h.clientAuthLog.Allow(); logOK {
			h.log.Warn("payment call refused: no valid pay token", "route", c.FullPath(), "remote", c.Request.RemoteAddr, "suppressedSinceLast", suppressed)
		}
		if token != "" {
			h.opts.AuthGuard.Failed(c.Request.RemoteAddr, "pay")
		}
		WriteError(c, h.log, apperr.New(apperr.Unauthorized, "a valid pay bearer token is required (PAYSERVER_PAY_TOKENS)"), "")
	}
}

// clientName returns the authenticated client's name.
func clientName(c *gin.Context) string { return c.GetString(clientKey) }

// NewClientAuthenticator returns a function that names the client of a
// bearer token, for protocols other than HTTP (gRPC): the same tokens,
// compared the same way.
func NewClientAuthenticator(list []ClientToken) func(token string) (string, bool) {
	ct := newClientTokens(list)
	return func(token string) (string, bool) {
		if token == "" {
			return "", false
		}
		return ct.match(token)
	}
}
