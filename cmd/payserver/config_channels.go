package main

import (
	"errors"
	"sort"
	"strings"
	"time"

	"payserver/internal/channel"
	"payserver/internal/channel/gateway"
	"payserver/internal/pay"
)

// ChannelConfig is one channel: an in-process simulator (the embedded
// default), or a channel gateway over HTTP when Gateway.URL is set (here,
// or for every channel by PAYSERVER_CHANNEL_GATEWAY_URL).
type ChannelConfig struct {
	channel.SimulatorConfig `yaml:",squash"`
	Gateway                 GatewayConfig `yaml:"gateway"`
	// UnknownOutcome is the channel's own timing for resolving its
	// unknown outcomes.
	UnknownOutcome UnknownOutcomeConfig `yaml:"unknownOutcome"`
}

// UnknownOutcomeConfig is a channel's own timing for resolving an unknown
// outcome (pay.UnknownRules), each measured from the order's creation; a
// zero field keeps the default: a first query and queries every
// resolver.backoff (5 s), a close at once.
type UnknownOutcomeConfig struct {
	// QueryAfter is the earliest first query: a channel that needs time
	// to book an order (and answers "no such order" meanwhile) is not
	// asked before.
	QueryAfter time.Duration `yaml:"queryAfter"`
	// QueryEvery is the wait after an unanswered query, doubling up to
	// resolver.maxBackoff: the interval at which the acquirer asks its
	// merchants to poll.
	QueryEvery time.Duration `yaml:"queryEvery"`
	// CloseAfter is the earliest close: WeChat Pay refuses to close an
	// order within 5 minutes of its creation.
	CloseAfter time.Duration `yaml:"closeAfter"`
}

// rules is u as the resolver takes it, an unset queryAfter or queryEvery
// being every (resolver.backoff).
func (u UnknownOutcomeConfig) rules(every time.Duration) pay.UnknownRules {
	r := pay.UnknownRules{QueryAfter: u.QueryAfter, QueryEvery: u.QueryEvery, CloseAfter: u.CloseAfter}
	if r.QueryAfter == 0 {
		r.QueryAfter = every
	}
	if r.QueryEvery == 0 {
		r.QueryEvery = every
	}
	return r
}

// GatewayConfig is a channel's gateway (gateway.Config).
type GatewayConfig struct {
	// URL is the gateway's base URL for this channel (the protocol's /pay,
	// /query and /close are appended).
	URL string `yaml:"url"`
	// Keys are the channel's signing keys: the first signs payserver's
	// requests, a message signed under any of them is accepted. Rolling a
	// key: add the new one second, move it first, remove the old one, each
	// step done on both sides before the next. Secrets are never logged;
	// one shorter than 32 bytes refuses the start.
	Keys []GatewayKey `yaml:"keys"`
	// Secret is the one key, id "default", of a channel without Keys.
	Secret string `yaml:"secret"`
	// ConnectTimeout bounds a connect and TLS handshake; 0 means 1s.
	ConnectTimeout time.Duration `yaml:"connectTimeout"`
	// CallTimeout bounds one call; 0 means channelTimeout.
	CallTimeout time.Duration `yaml:"callTimeout"`
	// MaxConns bounds the connections to the gateway; 0 means 64.
	MaxConns int `yaml:"maxConns"`
	// CAFile, CertFile, KeyFile and ServerName are TLS settings for an
	// https URL: the gateway's CA, a client certificate for mutual TLS,
	// and the name its certificate must carry.
	CAFile     string `yaml:"caFile"`
	CertFile   string `yaml:"certFile"`
	KeyFile    string `yaml:"keyFile"`
	ServerName string `yaml:"serverName"`
	// ThrottleCodes are the channel's decline codes that mean "too busy,
	// not processed" (WeChat Pay's FREQUENCY_LIMITED): a payment declined
	// with one of them is taken as THROTTLED. Never a code whose outcome
	// is unknown (gateway.Config.Validate refuses the known ones).
	ThrottleCodes []string `yaml:"throttleCodes"`
}

// GatewayKey is one signing key of a channel (gateway.Key).
type GatewayKey struct {
	ID     string `yaml:"id"`
	Secret string `yaml:"secret"`
}

// defaultKeyID is the id of a key given as a bare secret
// (gateway.secret, PAYSERVER_CHANNEL_GATEWAY_SECRET).
const defaultKeyID = "default"

// keysOf returns code's signing keys, and whether they are the fleet-wide
// PAYSERVER_CHANNEL_GATEWAY_SECRET, which every channel without keys of
// its own shares.
func (c Config) keysOf(code string) (keys gateway.Keys, shared bool) {
	g := c.Channels[code].Gateway
	switch {
	case len(g.Keys) > 0:
		for _, k := range g.Keys {
			keys = append(keys, gateway.Key{ID: k.ID, Secret: []byte(k.Secret)})
		}
		return keys, false
	case g.Secret != "":
		return gateway.Keys{{ID: defaultKeyID, Secret: []byte(g.Secret)}}, false
	case c.ChannelGatewaySecret != "":
		return gateway.Keys{{ID: defaultKeyID, Secret: []byte(c.ChannelGatewaySecret)}}, true
	}
	return nil, false
}

// gatewayOf returns code's gateway connection, and false for a channel
// served by an in-process simulator. A channel's own URL and keys win
// over the fleet-wide ones (PAYSERVER_CHANNEL_GATEWAY_URL and _SECRET),
// which serve the channel at URL/CODE.
func (c Config) gatewayOf(code string) (gateway.Config, bool) {
	g := c.Channels[code].Gateway
	url := g.URL
	if url == "" && c.ChannelGatewayURL != "" {
		url = strings.TrimSuffix(c.ChannelGatewayURL, "/") + "/" + code
	}
	keys, _ := c.keysOf(code)
	if url == "" {
		return gateway.Config{}, false
	}
	call := g.CallTimeout
	if call <= 0 {
		call = c.ChannelTimeout
	}
	return gateway.Config{
		Code: code, BaseURL: url, Keys: keys,
		ConnectTimeout: g.ConnectTimeout, CallTimeout: call, MaxConns: g.MaxConns,
		CAFile: g.CAFile, CertFile: g.CertFile, KeyFile: g.KeyFile, ServerName: g.ServerName,
		ThrottleCodes: g.ThrottleCodes,
	}, true
}

// sharedKeyChannels returns the gateway-served channels that sign with
// the fleet-wide PAYSERVER_CHANNEL_GATEWAY_SECRET, sorted.
func (c Config) sharedKeyChannels() []string {
	var codes []string
	for code := range c.Channels {
		if _, ok := c.gatewayOf(code); !ok {
			continue
		}
		if _, shared := c.keysOf(code); shared {
			codes = append(codes, code)
		}
	}
	sort.Strings(codes)
	return codes
}

// validateGateways checks every gateway-served channel's connection, and
// every channel's unknown-outcome timing.
func (c Config) validateGateways() error {
	var errs []error
	for code, ch := range c.Channels {
		if u := ch.UnknownOutcome; u.QueryAfter < 0 || u.QueryEvery < 0 || u.CloseAfter < 0 {
			errs = append(errs, errors.New("channel "+code+": unknownOutcome.queryAfter, queryEvery and closeAfter must not be negative"))
		}
	}
	for code := range c.Channels {
		g, ok := c.gatewayOf(code)
		if !ok {
			continue
		}
		if len(g.Keys) == 0 {
			errs = append(errs, errors.New("channel "+code+": a gateway needs keys (channels."+code+".gateway.keys, or PAYSERVER_CHANNEL_GATEWAY_SECRET)"))
			continue
		}
		if own := c.Channels[code].Gateway; len(own.Keys) > 0 && own.Secret != "" {
			errs = append(errs, errors.New("channel "+code+": gateway.keys and gateway.secret are both set; keep keys"))
			continue
		}
		if err := g.Validate(); err != nil {
			errs = append(errs, errors.New("channel "+code+": "+err.Error()))
		}
	}
	return errors.Join(errs...)
}
