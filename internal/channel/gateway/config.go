package gateway

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"
)

// Defaults of a Config's zero fields.
const (
	DefaultConnectTimeout = time.Second
	DefaultCallTimeout    = 5 * time.Second
	DefaultMaxConns       = 64
)

// MaxAnswerBytes bounds an answer's body: a longer one is not read, and
// the call's outcome is unknown.
const MaxAnswerBytes = 64 << 10

// Config is one channel's gateway connection. Zero durations and MaxConns
// select the defaults above.
type Config struct {
	// Code is the channel's code (ALIPAY, WECHAT, …).
	Code string
	// BaseURL is the gateway's http:// or https:// URL; the protocol's
	// paths (PathPay, …) are appended to it.
	BaseURL string
	// Keys are the channel's signing keys: the first signs requests, an
	// answer signed under any of them is believed. Secrets are never
	// logged; Config's String and LogValue name the keys by id.
	Keys Keys
	// Refused, when not nil, is told why an answer was refused (its
	// signature, timestamp or key), for payserver_channel_messages_refused_total.
	Refused func(Reason)
	// ConnectTimeout bounds establishing one connection: the TCP connect
	// and, for https, the TLS handshake. Default 1s.
	ConnectTimeout time.Duration
	// CallTimeout bounds one call, from asking for a connection to reading
	// the answer; the caller's ctx may end it sooner. Default 5s.
	CallTimeout time.Duration
	// MaxConns is the most connections open to the gateway at once; calls
	// beyond it wait for one (within their timeout). Default 64.
	MaxConns int
	// CAFile is a PEM file of the CAs that sign the gateway's certificate
	// (https only); empty trusts the system's roots.
	CAFile string
	// CertFile and KeyFile are a PEM client certificate and its key, for
	// gateways that require mutual TLS (https only; both or neither).
	CertFile, KeyFile string
	// ServerName is the name the gateway's certificate must carry (https
	// only); empty uses BaseURL's host.
	ServerName string
	// ThrottleCodes are the channel's decline codes that mean "too busy,
	// not processed" (WeChat Pay's FREQUENCY_LIMITED, say): a pay DECLINED
	// with one of them is taken as THROTTLED, so not sent. Only codes the
	// channel guarantees were not processed belong here: Validate refuses
	// empty codes and the known ones whose outcome is unknown.
	ThrottleCodes []string
}

// unknownOutcome reports whether code is one of the channels' known codes
// for "system error: the outcome is unknown, query the order" (or for an
// order already paid). Taken as THROTTLED, a processed payment could be
// sent to another channel and paid twice.
func unknownOutcome(code string) bool {
	switch code {
	case "ACQ.SYSTEM_ERROR", "SYSTEM_ERROR", "SYSTEMERROR", "isp.unknow-error", "ACQ.TRADE_HAS_SUCCESS", "ORDERPAID":
		return true
	}
	return false
}

// Validate reports the first field that is wrong, by name. It reads no
// files: NewChannel loads them and names the field of any it cannot use.
func (c Config) Validate() error {
	if c.Code == "" {
		return errors.New("gateway: Code is empty")
	}
	fail := func(format string, args ...any) error {
		return fmt.Errorf("gateway %s: "+format, append([]any{c.Code}, args...)...)
	}
	u, err := url.Parse(c.BaseURL)
	switch {
	case c.BaseURL == "":
		return fail("BaseURL is empty")
	case err != nil:
		return fail("BaseURL: %v", err)
	case u.Scheme != "http" && u.Scheme != "https":
		return fail("BaseURL %q: scheme must be http or https", c.BaseURL)
	case u.Host == "" || u.Hostname() == "":
		return fail("BaseURL %q has no host", c.BaseURL)
	case u.User != nil:
		return fail("BaseURL must not carry credentials")
	case u.RawQuery != "" || u.ForceQuery || strings.Contains(c.BaseURL, "#"):
		return fail("BaseURL %q: no query or fragment (the protocol's paths are appended to it)", c.BaseURL)
	}
	if err := c.Keys.Validate(); err != nil {
		return fail("Keys: %v", err)
	}
	switch {
	case c.ConnectTimeout < 0:
		return fail("ConnectTimeout %v is negative", c.ConnectTimeout)
	case c.CallTimeout < 0:
		return fail("CallTimeout %v is negative", c.CallTimeout)
	case c.MaxConns < 0:
		return fail("MaxConns %d is negative", c.MaxConns)
	}
	if u.Scheme == "http" {
		for _, f := range [...]struct{ name, value string }{
			{"CAFile", c.CAFile}, {"CertFile", c.CertFile}, {"KeyFile", c.KeyFile}, {"ServerName", c.ServerName},
		} {
			if f.value != "" {
				return fail("%s is set but BaseURL is http: TLS needs an https BaseURL", f.name)
			}
		}
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		return fail("CertFile and KeyFile go together: set both for mutual TLS, or neither")
	}
	for _, code := range c.ThrottleCodes {
		switch {
		case strings.TrimSpace(code) == "":
			return fail("ThrottleCodes has an empty code: it would take every codeless decline as not processed")
		case unknownOutcome(code):
			return fail("ThrottleCodes lists %s, whose outcome is unknown (query the order): only codes that prove the payment was not processed belong there", code)
		}
	}
	return nil
}

// withDefaults returns c with its zero fields set to the defaults.
func (c Config) withDefaults() Config {
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = DefaultConnectTimeout
	}
	if c.CallTimeout == 0 {
		c.CallTimeout = DefaultCallTimeout
	}
	if c.MaxConns == 0 {
		c.MaxConns = DefaultMaxConns
	}
	c.BaseURL = strings.TrimSuffix(c.BaseURL, "/")
	return c
}

// String describes c without its secrets.
func (c Config) String() string {
	return fmt.Sprintf("gateway.Config{Code:%s BaseURL:%s Keys:%v ConnectTimeout:%v CallTimeout:%v MaxConns:%d CAFile:%q CertFile:%q KeyFile:%q ServerName:%q}",
		c.Code, c.BaseURL, c.Keys.IDs(), c.ConnectTimeout, c.CallTimeout, c.MaxConns, c.CAFile, c.CertFile, c.KeyFile, c.ServerName)
}

// LogValue logs c without its secrets.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("code", c.Code), slog.String("baseURL", c.BaseURL), slog.Any("keys", c.Keys.IDs()),
		slog.Duration("connectTimeout", c.ConnectTimeout), slog.Duration("callTimeout", c.CallTimeout),
		slog.Int("maxConns", c.MaxConns), slog.String("caFile", c.CAFile),
		slog.String("certFile", c.CertFile), slog.String("keyFile", c.KeyFile), slog.String("serverName", c.ServerName),
	)
}
