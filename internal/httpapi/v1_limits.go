package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/gin-gonic/gin"

	"payserver/internal/apperr"
	"payserver/internal/iso4217"
	"payserver/internal/limitapi"
	"payserver/internal/pay"
)

// LimitsAPI is what the /v1/limits routes need. *limitapi.Service
// implements it.
type LimitsAPI interface {
	Acquire(ctx context.Context, client string, r limitapi.AcquireRequest) (limitapi.Acquired, error)
	Release(ctx context.Context, client string, r limitapi.ReleaseRequest) error
	Peek(ctx context.Context, client string, r limitapi.PeekRequest) (limitapi.Peeked, error)
}

// windowUsageJSON is one window's usage as the API shows it.
type windowUsageJSON struct {
	Scope string `json:"scope"`
	// MerchantID, on the request's merchant's own use of the window under
	// its merchant limit, names the merchant.
	MerchantID string `json:"merchantId,omitempty"`
	Rule       string `json:"rule"`
	Amount     bool   `json:"amount"`
	Currency   string `json:"currency,omitempty"`
	Limit      int64  `json:"limit"`
	WindowMs   int64  `json:"windowMs,omitempty"`
	Used       int64  `json:"used"`
	Remaining  int64  `json:"remaining"`
	// LimitMajor, UsedMajor and RemainingMajor are, on an amount window of
	// one currency, Limit, Used and Remaining in its major units.
	LimitMajor     string `json:"limitMajor,omitempty"`
	UsedMajor      string `json:"usedMajor,omitempty"`
	RemainingMajor string `json:"remainingMajor,omitempty"`
}

func windowsUsageJSON(ws []limitapi.WindowUsage) []windowUsageJSON {
	out := make([]windowUsageJSON, len(ws))
	for i, w := range ws {
		j := windowUsageJSON{Scope: w.Scope.String(), MerchantID: w.Merchant, Rule: w.Rule, Amount: w.Amount, Limit: w.Limit, WindowMs: w.Window.Milliseconds(), Used: w.Used, Remaining: w.Remaining}
		if w.Amount {
			j.Currency = w.Currency
			j.LimitMajor, _ = iso4217.Major(w.Limit, w.Currency)
			j.UsedMajor, _ = iso4217.Major(w.Used, w.Currency)
			j.RemainingMajor, _ = iso4217.Major(w.Remaining, w.Currency)
		}
		out[i] = j
	}
	return out
}

type acquireJSON struct {
	Allowed   bool              `json:"allowed"`
	BizType   string            `json:"bizType"`
	Channel   string            `json:"channel"`
	RequestID string            `json:"requestId"`
	Duplicate bool              `json:"duplicate"`
	Shadow    bool              `json:"shadow"`
	Windows   []windowUsageJSON `json:"windows"`
}

type releaseJSON struct {
	Released  bool   `json:"released"`
	BizType   string `json:"bizType"`
	Channel   string `json:"channel"`
	RequestID string `json:"requestId"`
}

type peekJSON struct {
	Allowed bool              `json:"allowed"`
	BizType string            `json:"bizType"`
	Channel string            `json:"channel"`
	Shadow  bool              `json:"shadow"`
	Windows []windowUsageJSON `json:"windows"`
}

// registerV1 adds the /v1/limits routes, each behind a client token.
func (h *handler) registerV1(r *gin.Engine) {
	g := r.Group("/v1/limits", h.authThrottle, h.requireClient, h.checkRequest)
	g.POST("/acquire", h.acquire)
	g.POST("/release", h.release)
	g.GET("/peek", h.peek)
}

// readBody reads a capped body; ok is false when the answer was written.
func (h *handler) readBody(c *gin.Context) ([]byte, bool) {
	body, err := io.ReadAll(c.Request.Body)
	if err != nil {
		var tooBig *http.MaxBytesError
		reason := "could not be read in time or was cut short"
		if errors.As(err, &tooBig) {
			reason = fmt.Sprintf("must be at most %d bytes", MaxBodyBytes)
		}
		WriteError(c, h.log, apperr.Invalid(apperr.FieldError{Field: "body", Reason: reason}), "")
		return nil, false
	}
	return body, true
}

func (h *handler) acquire(c *gin.Context) {
	body, ok := h.readBody(c)
	if !ok {
		return
	}
	client := clientName(c)
	log := h.log.With("client", client)
	req, err := limitapi.DecodeAcquire(body)
	if err != nil {
		WriteError(c, log, err, pay.PeekRequestID(body))
		return
	}
	res, err := h.opts.LimitsAPI.Acquire(c.Request.Context(), client, req)
	if err != nil {
		WriteError(c, log, err, req.RequestID)
		return
	}
	log.Debug("slot acquired", "key", req.Key.String(), "requestId", req.RequestID, "duplicate", res.Decision.Duplicate)
	WriteJSON(c, log, http.StatusOK, acquireJSON{
		Allowed: true, BizType: req.Key.BizType, Channel: req.Key.Channel, RequestID: req.RequestID,
		Duplicate: res.Decision.Duplicate, Shadow: res.Decision.Shadow, Windows: windowsUsageJSON(res.Windows),
	})
}

func (h *handler) release(c *gin.Context) {
	body, ok := h.readBody(c)
	if !ok {
		return
	}
	client := clientName(c)
	log := h.log.With("client", client)
	req, err := limitapi.DecodeRelease(body)
	if err != nil {
		WriteError(c, log, err, pay.PeekRequestID(body))
		return
	}
	if err := h.opts.LimitsAPI.Release(c.Request.Context(), client, req); err != nil {
		WriteError(c, log, err, req.RequestID)
		return
	}
	log.Info("slot released by its client", "key", req.Key.String(), "requestId", req.RequestID)
	WriteJSON(c, log, http.StatusOK, releaseJSON{Released: true, BizType: req.Key.BizType, Channel: req.Key.Channel, RequestID: req.RequestID})
}

func (h *handler) peek(c *gin.Context) {
	client := clientName(c)
	log := h.log.With("client", client)
	q := c.Request.URL.Query()
	names := make([]string, 0, len(q))
	for n := range q {
		names = append(names, n)
	}
	req, err := limitapi.ParsePeek(func(n string) []string { return q[n] }, names)
	if err != nil {
		WriteError(c, log, err, "")
		return
	}
	p, err := h.opts.LimitsAPI.Peek(c.Request.Context(), client, req)
	if err != nil {
		WriteError(c, log, err, "")
		return
	}
	WriteJSON(c, log, http.StatusOK, peekJSON{
		Allowed: p.Allowed, BizType: req.Key.BizType, Channel: req.Key.Channel, Shadow: p.Shadow, Windows: windowsUsageJSON(p.Windows),
	})
}
