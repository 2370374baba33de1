package main

import (
	"errors"
	"strings"
	"time"

	"payserver/internal/channel"
	"payserver/internal/channel/gateway"
)

// ChannelConfig is one channel: an in-process simulator (the embedded
// default), or a channel gateway over HTTP when Gateway.URL is set (here,
// or for every channel by PAYSERVER_CHANNEL_GATEWAY_URL).
type ChannelConfig struct {
	channel.SimulatorConfig `yaml:",squash"`
	Gateway                 GatewayConfig `yaml:"gateway"`
}

// GatewayConfig is a channel's gateway (gateway.Config).
type GatewayConfig struct {
	// URL is the gateway's base URL for this channel (the protocol's /pay,
	// /query and /close are appended).
	URL string `yaml:"url"`
	// Secret signs every request and answer. Never logged.
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

// gatewayOf returns code's gateway connection, and false for a channel
// served by an in-process simulator. A channel's own URL and secret win
// over the fleet-wide ones (PAYSERVER_CHANNEL_GATEWAY_URL and _SECRET),
// which serve the channel at URL/CODE.
func (c Config) gatewayOf(code string) (gateway.Config, bool) {
	g := c.Channels[code].Gateway
	url, secret := g.URL, g.Secret
	if url == "" && c.ChannelGatewayURL != "" {
		url = strings.TrimSuffix(c.ChannelGatewayURL, "/") + "/" + code
	}
	if secret == "" {
		secret = c.ChannelGatewaySecret
	}
	if url == "" {
		return gateway.Config{}, false
	}
	call := g.CallTimeout
	if call <= 0 {
		call = c.ChannelTimeout
	}
	return gateway.Config{
		Code: code, BaseURL: url, Secret: []byte(secret),
		ConnectTimeout: g.ConnectTimeout, CallTimeout: call, MaxConns: g.MaxConns,
		CAFile: g.CAFile, CertFile: g.CertFile, KeyFile: g.KeyFile, ServerName: g.ServerName,
		ThrottleCodes: g.ThrottleCodes,
	}, true
}

// validateGateways checks every gateway-served channel's connection.
func (c Config) validateGateways() error {
	var errs []error
	for code := range c.Channels {
		g, ok := c.gatewayOf(code)
		if !ok {
			continue
		}
		if len(g.Secret) == 0 {
			errs = append(errs, errors.New("channel "+code+": a gateway needs a secret (channels."+code+".gateway.secret or PAYSERVER_CHANNEL_GATEWAY_SECRET)"))
			continue
		}
		if err := g.Validate(); err != nil {
			errs = append(errs, errors.New("channel "+code+": "+err.Error()))
		}
	}
	return errors.Join(errs...)
}
