package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"sync/atomic"
	"time"

	"payserver/internal/channel"
)

// ErrBadAnswer is an answer payserver cannot believe: a status other than
// 200 (or 401), a body that is too long or not an Answer, a bad or stale
// signature, another order's answer, or an outcome the call cannot have.
// The request may have been processed: the outcome is unknown.
var ErrBadAnswer = errors.New("gateway: an answer that cannot be believed")

// maxThrottleWait caps a THROTTLED answer's retryAfterMs.
const maxThrottleWait = time.Hour

// The operations, as errors and logs name them.
const (
	opPay   = "pay"
	opQuery = "query"
	opClose = "close"
)

// Channel is payserver's connection to one channel's gateway: a
// channel.Channel (Pay) and a channel.Lookup (Query, Close). Every request
// is signed and every answer's signature checked before it is believed.
// It is safe for concurrent use.
//
// A call's error says what can have happened. It is channel.ErrNotSent
// (errors.Is) only when the gateway provably processed nothing: no
// connection was ever handed to the request (the connect or TLS handshake
// failed, or the call ended while waiting for one), the gateway refused
// our signature (401), or it answered THROTTLED (*channel.ThrottledError).
// Only a signed answer is believed, THROTTLED included; the 401 is the one
// unsigned answer taken at its word, as the protocol defines it. Every
// other error, once a connection carried the request, leaves the outcome
// unknown; one where the call's time ran out wraps channel.ErrTimeout, one
// about the answer wraps ErrBadAnswer. A gateway refusing our client
// certificate is among them: under TLS 1.3 the refusal arrives only after
// the request was written, so it cannot be told from a failure after
// processing.
type Channel struct {
	code        string
	base        string
	keys        Keys
	refused     func(Reason)
	callTimeout time.Duration
	transport   *http.Transport
	client      *http.Client
	log         *slog.Logger
	now         func() time.Time
	// throttleCodes are the decline codes that mean THROTTLED.
	throttleCodes map[string]bool
}

// NewChannel returns the Channel of cfg, which must be valid; it loads
// cfg's TLS files. now is the clock of signatures (nil: time.Now); a nil
// logger discards the logs.
//
// Requests are HTTP/1.1 on pooled keep-alive connections (at most
// cfg.MaxConns; idle ones close after 30s), never through a proxy (whose
// connection would say nothing about the gateway's).
//
// A request goes on the wire at most once. None carries an
// Idempotency-Key, so net/http does not take a POST for replayable: once
// any byte of it was written, a connection that dies before the answer
// ends the call. For a pay that is an unknown outcome for the resolver
// (query, close, notification); a query or close is asked again at the
// resolver's next attempt, signed afresh (a repeat of its signed bytes
// would be refused by the gateway's nonce cache). The transport may still
// move a request to a new connection when not one byte of it was written
// on a reused one; because of such moves, a connect error counts as "not
// sent" only when no earlier attempt of the call had a connection.
func NewChannel(cfg Config, logger *slog.Logger, now func() time.Time) (*Channel, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if now == nil {
		now = time.Now
	}
	u, _ := url.Parse(cfg.BaseURL) // valid: Validate parsed it
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	tr := &http.Transport{
		Proxy:                  nil,
		MaxConnsPerHost:        cfg.MaxConns,
		MaxIdleConns:           cfg.MaxConns,
		MaxIdleConnsPerHost:    cfg.MaxConns,
		IdleConnTimeout:        30 * time.Second,
		DisableCompression:     true,
		MaxResponseHeaderBytes: MaxAnswerBytes,
		Protocols:              &protocols,
	}
	var d *dialer
	if u.Scheme == "https" {
		tc, err := tlsConfig(cfg)
		if err != nil {
			return nil, err
		}
		d = newDialer(cfg.ConnectTimeout, tc)
		tr.DialTLSContext = d.dialTLS
	} else {
		d = newDialer(cfg.ConnectTimeout, nil)
	}
	tr.DialContext = d.dial
	return &Channel{
		code:        cfg.Code,
		base:        cfg.BaseURL,
		keys:        cfg.Keys.Clone(),
		refused:     cfg.Refused,
		callTimeout: cfg.CallTimeout,
		transport:   tr,
		client: &http.Client{
			Transport: tr,
			// An answer is the gateway's own; a redirect is not followed
			// (it is a bad answer).
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		log:           logger,
		now:           now,
		throttleCodes: codeSet(cfg.ThrottleCodes),
	}, nil
}

// Code returns the channel's code.
func (c *Channel) Code() string { return c.code }

// CloseIdle closes the idle pooled connections, for shutdown. Calls may
// still be made; they open new ones.
func (c *Channel) CloseIdle() { c.transport.CloseIdleConnections() }

// Pay sends one payment. SUCCEEDED, DECLINED and PROCESSING are Results;
// THROTTLED is a *channel.ThrottledError; any other answer or failure is
// an error classified as Channel's doc says.
func (c *Channel) Pay(ctx context.Context, req channel.Request) (channel.Result, error) {
	a, err := c.call(ctx, opPay, PathPay, req.OrderNo, PayRequest{
		OrderNo: req.OrderNo, RequestID: req.RequestID, MerchantID: req.MerchantID,
		Amount: req.Amount, Currency: req.Currency, Subject: req.Subject,
	})
	if err != nil {
		return channel.Result{}, err
	}
	if res, ok := paymentResult(a.Outcome, a); ok {
		return res, nil
	}
	return channel.Result{}, c.unexpected(opPay, a)
}

// Query asks for an order's outcome: a Result (Succeeded, Declined or
// Processing), channel.ErrNotFound when the gateway has no such order, or
// another error, which teaches nothing.
func (c *Channel) Query(ctx context.Context, req channel.Request) (channel.Result, error) {
	a, err := c.call(ctx, opQuery, PathQuery, req.OrderNo, orderRequest(req))
	if err != nil {
		return channel.Result{}, err
	}
	if a.Outcome == NotFound {
		return channel.Result{}, fmt.Errorf("gateway %s: query %s: %w", c.code, req.OrderNo, channel.ErrNotFound)
	}
	if res, ok := paymentResult(a.Outcome, a); ok {
		return res, nil
	}
	return channel.Result{}, c.unexpected(opQuery, a)
}

// Close closes an order: after a CLOSED answer the gateway never processes
// it, and the CloseResult says whether it had (and then its outcome). Any
// other answer or failure is an error, which teaches nothing.
func (c *Channel) Close(ctx context.Context, req channel.Request) (channel.CloseResult, error) {
	a, err := c.call(ctx, opClose, PathClose, req.OrderNo, orderRequest(req))
	if err != nil {
		return channel.CloseResult{}, err
	}
	if a.Outcome != Closed {
		return channel.CloseResult{}, c.unexpected(opClose, a)
	}
	if !a.Processed {
		if a.Result != "" {
			return channel.CloseResult{}, c.unknown(opClose, a.OrderNo,
				fmt.Errorf("%w: CLOSED unprocessed with result %q", ErrBadAnswer, a.Result))
		}
		return channel.CloseResult{}, nil
	}
	res, ok := paymentResult(a.Result, a)
	if !ok || res.Status == channel.Processing {
		return channel.CloseResult{}, c.unknown(opClose, a.OrderNo,
			fmt.Errorf("%w: CLOSED processed with result %q", ErrBadAnswer, a.Result))
	}
	return channel.CloseResult{Processed: true, Result: res}, nil
}

// orderRequest is the body of a query or close of req's order.
func orderRequest(req channel.Request) OrderRequest {
	return OrderRequest{OrderNo: req.OrderNo, RequestID: req.RequestID, Amount: req.Amount, Currency: req.Currency}
}

// paymentResult is the Result of a payment outcome (SUCCEEDED, DECLINED,
// PROCESSING) with a's details; ok is false for any other outcome, and
// for THROTTLED the caller gets a *channel.ThrottledError instead.
func paymentResult(o Outcome, a Answer) (channel.Result, bool) {
	switch o {
	case Succeeded:
		return channel.Result{Status: channel.Succeeded, TradeNo: a.TradeNo}, true
	case Declined:
		return channel.Result{Status: channel.Declined, DeclineCode: a.Code, DeclineReason: a.Reason}, true
	case Processing:
		return channel.Result{Status: channel.Processing}, true
	}
	return channel.Result{}, false
}

// unexpected is the error of an answer that is not one of op's results:
// THROTTLED (nothing was processed), or an outcome op cannot have.
func (c *Channel) unexpected(op string, a Answer) error {
	if a.Outcome == Throttled {
		wait := time.Duration(min(max(a.RetryAfterMs, 0), maxThrottleWait.Milliseconds())) * time.Millisecond
		c.log.Debug("gateway throttled the call; nothing was processed",
			"channel", c.code, "op", op, "orderNo", a.OrderNo, "retryAfter", wait)
		return &channel.ThrottledError{Channel: c.code, RetryAfter: wait}
	}
	return c.unknown(op, a.OrderNo, fmt.Errorf("%w: outcome %q to a %s", ErrBadAnswer, a.Outcome, op))
}

// call sends msg to path, signed, and returns the gateway's answer about
// orderNo, its signature checked. Its error is classified: see Channel.
func (c *Channel) call(ctx context.Context, op, path, orderNo string, msg any) (Answer, error) {
	if orderNo == "" {
		return Answer{}, c.notSent(op, orderNo, errors.New("no orderNo"))
	}
	body, err := json.Marshal(msg)
	if err != nil {
		return Answer{}, c.notSent(op, orderNo, err)
	}
	ctx, cancel := context.WithTimeout(ctx, c.callTimeout)
	defer cancel()
	// conns counts the connections the transport handed this request (a
	// repeat gets another). While it is 0 nothing of the request can have
	// been written anywhere.
	var conns atomic.Int32
	trace := &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) { conns.Add(1) }}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), http.MethodPost, c.base+path, bytes.NewReader(body))
	if err != nil {
		return Answer{}, c.notSent(op, orderNo, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	signed := Message{Method: http.MethodPost, Path: req.URL.EscapedPath(), Body: body}
	Sign(req.Header, c.keys[0], signed, c.now())

	resp, err := c.client.Do(req)
	if err != nil {
		return Answer{}, c.failed(ctx, op, orderNo, conns.Load() > 0, err)
	}
	defer resp.Body.Close()
	// A 401 or a THROTTLED answer proves that nothing was processed only
	// for the attempt it answers: after the transport moved the request
	// to a new connection, taken as if the first attempt may have been
	// processed.
	repeated := conns.Load() > 1
	if resp.StatusCode == http.StatusUnauthorized && repeated {
		io.Copy(io.Discard, io.LimitReader(resp.Body, MaxAnswerBytes))
		return Answer{}, c.unknown(op, orderNo, fmt.Errorf("%w: 401 to a repeated request: the first attempt may have been processed", ErrBadAnswer))
	}
	if resp.StatusCode == http.StatusUnauthorized {
		// By the protocol a 401 means the gateway refused our signature
		// and processed nothing.
		io.Copy(io.Discard, io.LimitReader(resp.Body, MaxAnswerBytes))
		c.log.Error("gateway refused our signature (401); nothing was processed: check the channel's keys and this host's clock",
			"channel", c.code, "op", op, "orderNo", orderNo)
		return Answer{}, fmt.Errorf("gateway %s: %s %s was refused (401, bad or stale signature; check the keys): %w",
			c.code, op, orderNo, channel.ErrNotSent)
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, MaxAnswerBytes+1))
	if err != nil {
		return Answer{}, c.failed(ctx, op, orderNo, true, err)
	}
	signed.Body, signed.Answer = raw, true
	a, err := c.believe(resp, signed, orderNo)
	if err != nil {
		return Answer{}, c.unknown(op, orderNo, err)
	}
	if op == opPay && a.Outcome == Declined && c.throttleCodes[a.Code] {
		// The channel's own word for "too busy": nothing was processed.
		a.Outcome, a.RetryAfterMs = Throttled, 0
	}
	if a.Outcome == Throttled && repeated {
		return Answer{}, c.unknown(op, orderNo, fmt.Errorf("%w: THROTTLED to a repeated request: the first attempt may have been processed", ErrBadAnswer))
	}
	return a, nil
}

// believe checks an answer: status 200, a body within MaxAnswerBytes
// signed by the gateway within MaxSkew of now, an Answer about orderNo.
func (c *Channel) believe(resp *http.Response, msg Message, orderNo string) (Answer, error) {
	raw := msg.Body
	if resp.StatusCode != http.StatusOK {
		return Answer{}, fmt.Errorf("%w: status %d", ErrBadAnswer, resp.StatusCode)
	}
	if len(raw) > MaxAnswerBytes {
		return Answer{}, fmt.Errorf("%w: longer than %d bytes", ErrBadAnswer, MaxAnswerBytes)
	}
	if _, err := Verify(resp.Header, c.keys, msg, c.now()); err != nil {
		if reason, ok := ReasonOf(err); ok && c.refused != nil {
			c.refused(reason)
		}
		return Answer{}, fmt.Errorf("%w: %w", ErrBadAnswer, err)
	}
	var a Answer
	if err := json.Unmarshal(raw, &a); err != nil {
		return Answer{}, fmt.Errorf("%w: not an answer: %v", ErrBadAnswer, err)
	}
	if a.OrderNo != orderNo {
		return Answer{}, fmt.Errorf("%w: it names order %q", ErrBadAnswer, a.OrderNo)
	}
	return a, nil
}

// failed classifies a call that got no answer. gotConn says whether the
// transport ever handed the request a connection.
func (c *Channel) failed(ctx context.Context, op, orderNo string, gotConn bool, err error) error {
	var de *dialError
	if !gotConn && (errors.As(err, &de) || ctx.Err() != nil) {
		// No connection ever carried the request: the connect or TLS
		// handshake failed, or the call ended before one was ready.
		return c.notSent(op, orderNo, err)
	}
	var ne net.Error
	if ctx.Err() != nil || (errors.As(err, &ne) && ne.Timeout()) {
		return c.unknown(op, orderNo, fmt.Errorf("%w: %w", channel.ErrTimeout, err))
	}
	return c.unknown(op, orderNo, err)
}

// notSent is the error of a call that provably reached no gateway.
func (c *Channel) notSent(op, orderNo string, err error) error {
	c.log.Warn("gateway call not sent; nothing was processed",
		"channel", c.code, "op", op, "orderNo", orderNo, "reason", err.Error())
	return fmt.Errorf("gateway %s: %s %s: %w: %w", c.code, op, orderNo, err, channel.ErrNotSent)
}

// unknown is the error of a call that may have been processed.
func (c *Channel) unknown(op, orderNo string, err error) error {
	c.log.Warn("gateway call failed after the request may have left; outcome unknown",
		"channel", c.code, "op", op, "orderNo", orderNo, "reason", err.Error())
	return fmt.Errorf("gateway %s: %s %s: outcome unknown: %w", c.code, op, orderNo, err)
}

// codeSet is codes as a set; nil for none.
func codeSet(codes []string) map[string]bool {
	if len(codes) == 0 {
		return nil
	}
	set := make(map[string]bool, len(codes))
	for _, c := range codes {
		set[c] = true
	}
	return set
}
