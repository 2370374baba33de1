package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"payserver/internal/apperr"
	"payserver/internal/channel"
	"payserver/internal/channel/gateway"
	"payserver/internal/pay"
)

// Notifier takes a channel's asynchronous notification. *pay.Resolver
// implements it.
type Notifier interface {
	Notify(ctx context.Context, n pay.Notification) (*pay.Order, error)
}

// NotifyOptions serves POST /channels/{code}/notify: a channel gateway's
// signed word on an order's final outcome.
type NotifyOptions struct {
	Notifier Notifier
	// Keys returns the signing keys of a channel served by a gateway;
	// false for a channel that does not notify (an in-process simulator).
	Keys func(code string) (gateway.Keys, bool)
	// Nonces remembers the nonces of the notifications taken, against
	// replay; required.
	Nonces *gateway.NonceCache
	// Refused, when not nil, counts a notification refused for its
	// signature, timestamp, nonce or key
	// (payserver_channel_messages_refused_total).
	Refused func(channel string, reason gateway.Reason)
}

// postNotify verifies a notification's signature, timestamp, key and
// nonce before reading anything from it: a forged, stale or replayed one
// is refused (401) and changes nothing. When the nonce cache is full of
// nonces still inside the window it is refused with 503 (the gateway
// sends it again later) rather than a nonce forgotten early. A duplicate
// (sent again with its own nonce), or a notification about an order
// already final, is taken (204) and changes nothing either.
func (h *handler) postNotify(c *gin.Context) {
	code := c.Param("code")
	keys, ok := h.opts.Notify.Keys(code)
	if !ok {
		WriteError(c, h.log, apperr.New(apperr.NotFound, "channel %s takes no notifications", code), "")
		return
	}
	body, err := io.ReadAll(c.Request.Body)
	if err != nil {
		WriteError(c, h.log, apperr.Invalid(apperr.FieldError{Field: "body", Reason: "could not be read in time or was cut short"}), "")
		return
	}
	now := h.opts.Now()
	msg := gateway.Message{Method: c.Request.Method, Path: c.Request.URL.EscapedPath(), Body: body}
	signed, err := gateway.Verify(c.Request.Header, keys, msg, now)
	if err == nil {
		err = h.opts.Notify.Nonces.Add(code, signed.Nonce, now)
	}
	if errors.Is(err, gateway.ErrNonceCacheFull) {
		h.log.Warn("a channel notification was refused: the nonce cache is full", "channel", code,
			"size", h.opts.Notify.Nonces.Size())
		WriteError(c, h.log, apperr.New(apperr.DependencyUnavailable, "too many notifications within the replay window; send it again later"), "")
		return
	}
	if reason, refused := gateway.ReasonOf(err); refused {
		// Rate-limited with the failed authentications: a flood of forged
		// notifications must not flood the log.
		if ok, suppressed := h.authLog.Allow(); ok {
			h.log.Warn("a channel notification was refused", "channel", code, "reason", reason,
				"remote", c.ClientIP(), "err", err, "suppressedSinceLast", suppressed)
		}
		if h.opts.Notify.Refused != nil {
			h.opts.Notify.Refused(code, reason)
		}
		WriteError(c, h.log, apperr.New(apperr.Unauthorized, "the notification's signature is bad, stale or replayed (%s)", reason), "")
		return
	}
	var a gateway.Answer
	if err := json.Unmarshal(body, &a); err != nil || a.OrderNo == "" {
		WriteError(c, h.log, apperr.Invalid(apperr.FieldError{Field: "body", Reason: "must be a gateway answer with an orderNo"}), "")
		return
	}
	res := channel.Result{TradeNo: a.TradeNo, DeclineCode: a.Code, DeclineReason: a.Reason}
	switch a.Outcome {
	case gateway.Succeeded:
		res.Status = channel.Succeeded
	case gateway.Declined:
		res.Status = channel.Declined
	default:
		WriteError(c, h.log, apperr.Invalid(apperr.FieldError{Field: "outcome", Reason: "must be SUCCEEDED or DECLINED"}), "")
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Request.Context()), 10*time.Second)
	defer cancel()
	if _, err := h.opts.Notify.Notifier.Notify(ctx, pay.Notification{Channel: code, OrderNo: a.OrderNo, Result: res}); err != nil {
		var ae *apperr.Error
		if !errors.As(err, &ae) {
			err = apperr.Wrap(err, apperr.Internal, "the notification could not be taken")
		}
		WriteError(c, h.log, err, "")
		return
	}
	c.Status(http.StatusNoContent)
}
