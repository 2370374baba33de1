// Package client is a Go client of payserver's limits service
// (/v1/limits): Acquire a slot before calling a payment channel outside
// POST /pay, Release it when the channel was never called, Peek at the
// room left. Every call has a timeout, and every failure is a typed error:
// *LimitedError (with RetryAfter), *InvalidError, *ConflictError,
// ErrUnauthorized, ErrSlotNotFound, or *UnavailableError.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// DefaultTimeout bounds one call when Options.Timeout is zero. A call with
// MaxWait gets MaxWait on top.
const DefaultTimeout = 5 * time.Second

// Options configures a Client.
type Options struct {
	// BaseURL is payserver's address, e.g. "http://payserver:8080".
	BaseURL string
	// Token is this caller's client token (PAYSERVER_CLIENT_TOKENS).
	Token string
	// Timeout bounds each call (plus the call's MaxWait). Default
	// DefaultTimeout.
	Timeout time.Duration
	// HTTPClient sends the requests; nil means a client of its own.
	HTTPClient *http.Client
}

// Client calls one payserver. It is safe for concurrent use.
type Client struct {
	base  *url.URL
	token string
	opts  Options
	http  *http.Client
}

// New returns a Client for opts.
func New(opts Options) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(opts.BaseURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("client: base URL %q: want http(s)://host[:port]", opts.BaseURL)
	}
	if opts.Token == "" {
		return nil, errors.New("client: empty token")
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	hc := opts.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	return &Client{base: u, token: opts.Token, opts: opts, http: hc}, nil
}

// Key names one limited pair.
type Key struct {
	BizType string
	Channel string
}

// AcquireRequest asks for a slot.
type AcquireRequest struct {
	Key
	// RequestID is the member: one per channel call; a retry with the same
	// one is never counted twice.
	RequestID string
	// Amount (minor units) and Currency are optional (0 and "": none).
	Amount   int64
	Currency string
	// MaxWait lets a refused request wait for a slot, up to 30 s; 0 means
	// no waiting.
	MaxWait time.Duration
}

// Window is one window's usage.
type Window struct {
	// Scope is the key the window belongs to: the request's BIZTYPE:CHANNEL
	// or the channel-wide *:CHANNEL.
	Scope string `json:"scope"`
	// Rule is the window's kind: "count/1s", "amount/day"…
	Rule string `json:"rule"`
	// Amount is true when the window caps amounts (minor units).
	Amount    bool          `json:"amount"`
	Limit     int64         `json:"limit"`
	WindowMs  int64         `json:"windowMs"` // 0 for a calendar window
	Used      int64         `json:"used"`
	Remaining int64         `json:"remaining"`
	Size      time.Duration `json:"-"`
}

// Acquired is an admission.
type Acquired struct {
	// Duplicate is true when the requestId already held a slot.
	Duplicate bool     `json:"duplicate"`
	Shadow    bool     `json:"shadow"`
	Windows   []Window `json:"windows"`
}

// Peeked is the room in each window of a key.
type Peeked struct {
	// Allowed reports whether a request would be admitted now.
	Allowed bool     `json:"allowed"`
	Shadow  bool     `json:"shadow"`
	Windows []Window `json:"windows"`
}

// Acquire takes a slot. A refusal is a *LimitedError.
func (c *Client) Acquire(ctx context.Context, r AcquireRequest) (Acquired, error) {
	body := map[string]any{"bizType": r.BizType, "channel": r.Channel, "requestId": r.RequestID}
	if r.Amount != 0 {
		body["amount"] = r.Amount
	}
	if r.Currency != "" {
		body["currency"] = r.Currency
	}
	if r.MaxWait > 0 {
		body["maxWaitMs"] = r.MaxWait.Milliseconds()
	}
	var out Acquired
	err := c.call(ctx, http.MethodPost, "/v1/limits/acquire", nil, body, r.MaxWait, &out)
	fillSizes(out.Windows)
	return out, err
}

// Release gives back the slot of requestID: the caller never called the
// channel for it. Releasing a requestId that holds no slot for this client
// changes nothing and returns ErrSlotNotFound.
func (c *Client) Release(ctx context.Context, k Key, requestID string) error {
	body := map[string]any{"bizType": k.BizType, "channel": k.Channel, "requestId": requestID}
	return c.call(ctx, http.MethodPost, "/v1/limits/release", nil, body, 0, &struct{}{})
}

// Peek reports the room in each window of k without consuming anything.
// PeekPayment asks for a payment of an amount.
func (c *Client) Peek(ctx context.Context, k Key) (Peeked, error) {
	return c.PeekPayment(ctx, k, 0, "")
}

// PeekPayment is Peek for a payment of amount in currency, which amount
// caps in that currency count. An amount needs its currency (the server
// answers 400 without it).
func (c *Client) PeekPayment(ctx context.Context, k Key, amount int64, currency string) (Peeked, error) {
	q := url.Values{"bizType": {k.BizType}, "channel": {k.Channel}}
	if amount != 0 {
		q.Set("amount", strconv.FormatInt(amount, 10))
	}
	if currency != "" {
		q.Set("currency", currency)
	}
	var out Peeked
	err := c.call(ctx, http.MethodGet, "/v1/limits/peek", q, nil, 0, &out)
	fillSizes(out.Windows)
	return out, err
}

func fillSizes(ws []Window) {
	for i := range ws {
		ws[i].Size = time.Duration(ws[i].WindowMs) * time.Millisecond
	}
}

// call sends one request and decodes a 200 into out, or the error body
// into a typed error.
func (c *Client) call(ctx context.Context, method, path string, q url.Values, body any, wait time.Duration, out any) error {
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout+wait)
	defer cancel()
	u := *c.base
	u.Path += path
	u.RawQuery = q.Encode()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return &InvalidError{Message: err.Error()}
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return &InvalidError{Message: err.Error()}
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return &UnavailableError{Err: err}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return &UnavailableError{Status: resp.StatusCode, Err: err}
	}
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(data, out); err != nil {
			return &UnavailableError{Status: resp.StatusCode, Err: fmt.Errorf("bad answer: %w", err)}
		}
		return nil
	}
	return decodeError(resp, data)
}
