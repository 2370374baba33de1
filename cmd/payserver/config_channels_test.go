package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"payserver/internal/pay"
)

const (
	longKeyA = "key-a-0123456789abcdefghijklmnopqrstuv"
	longKeyB = "key-b-0123456789abcdefghijklmnopqrstuv"
)

// TestGatewayKeys: each channel's keys come from gateway.keys (the first
// signs), gateway.secret or the fleet-wide secret, in that order; a key
// shorter than 32 bytes, or keys and a secret together, refuse the start
// without showing the secret.
func TestGatewayKeys(t *testing.T) {
	yaml := fmt.Sprintf(`channels:
  ALIPAY:
    gateway: {url: "http://127.0.0.1:9000/ALIPAY", keys: [{id: "2026-q1", secret: %q}, {id: "2025-q4", secret: %q}]}
  WECHAT: {}
  UNIONPAY: {}
`, longKeyA, longKeyB)
	cfg, err := LoadConfig(envFrom(map[string]string{
		"PAYSERVER_CONFIG":                 writeTemp(t, yaml),
		"PAYSERVER_CHANNEL_GATEWAY_URL":    "http://127.0.0.1:9000",
		"PAYSERVER_CHANNEL_GATEWAY_SECRET": strings.Repeat("s", 32),
	}))
	if err != nil {
		t.Fatal(err)
	}
	g, ok := cfg.gatewayOf("ALIPAY")
	if !ok || fmt.Sprint(g.Keys.IDs()) != "[2026-q1 2025-q4]" || string(g.Keys[0].Secret) != longKeyA {
		t.Errorf("ALIPAY keys %v, want its own two, 2026-q1 first", g.Keys.IDs())
	}
	if w, _ := cfg.gatewayOf("WECHAT"); fmt.Sprint(w.Keys.IDs()) != "[default]" {
		t.Errorf("WECHAT keys %v, want the fleet-wide one (default)", w.Keys.IDs())
	}
	if got := fmt.Sprint(cfg.sharedKeyChannels()); got != "[UNIONPAY WECHAT]" {
		t.Errorf("channels sharing the fleet-wide key %s, want [UNIONPAY WECHAT]", got)
	}

	short := "too-short-secret"
	for name, env := range map[string]map[string]string{
		"short fleet secret": {"PAYSERVER_CHANNEL_GATEWAY_URL": "http://127.0.0.1:9000", "PAYSERVER_CHANNEL_GATEWAY_SECRET": short},
		"short key":          {"PAYSERVER_CONFIG": writeTemp(t, fmt.Sprintf("channels:\n  ALIPAY:\n    gateway: {url: \"http://127.0.0.1:9000\", keys: [{id: k1, secret: %q}, {id: k2, secret: %q}]}\n", longKeyA, short))},
		"keys and secret":    {"PAYSERVER_CONFIG": writeTemp(t, fmt.Sprintf("channels:\n  ALIPAY:\n    gateway: {url: \"http://127.0.0.1:9000\", secret: %q, keys: [{id: k1, secret: %q}]}\n", longKeyB, longKeyA))},
		"repeated id":        {"PAYSERVER_CONFIG": writeTemp(t, fmt.Sprintf("channels:\n  ALIPAY:\n    gateway: {url: \"http://127.0.0.1:9000\", keys: [{id: k1, secret: %q}, {id: k1, secret: %q}]}\n", longKeyA, longKeyB))},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := LoadConfig(envFrom(env))
			if err == nil {
				t.Fatal("LoadConfig accepted it")
			}
			for _, s := range []string{short, longKeyA, longKeyB} {
				if strings.Contains(err.Error(), s) {
					t.Errorf("the error shows a secret: %v", err)
				}
			}
		})
	}
}

// TestUnknownOutcomeRules: a channel's unknownOutcome timing reaches the
// resolver's rules; zero fields keep the resolver's; negative ones refuse
// the start.
func TestUnknownOutcomeRules(t *testing.T) {
	cfg, err := LoadConfig(envFrom(map[string]string{"PAYSERVER_CONFIG": writeTemp(t, `channels:
  WECHAT:
    unknownOutcome: {queryAfter: 5s, queryEvery: 5s, closeAfter: 5m}
  ALIPAY: {}
`)}))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Channels["WECHAT"].UnknownOutcome.rules(cfg.Resolver.Backoff); got.QueryAfter != 5*time.Second || got.QueryEvery != 5*time.Second || got.CloseAfter != 5*time.Minute {
		t.Errorf("WECHAT rules %+v, want 5s, 5s, 5m", got)
	}
	// A channel with no rules of its own: the defaults, a first query and
	// queries every 5 s (resolver.backoff), a close at once.
	if got := cfg.Channels["ALIPAY"].UnknownOutcome.rules(cfg.Resolver.Backoff); got != (pay.UnknownRules{QueryAfter: 5 * time.Second, QueryEvery: 5 * time.Second}) {
		t.Errorf("ALIPAY rules %+v, want the defaults 5s, 5s, 0", got)
	}
	if _, err := LoadConfig(envFrom(map[string]string{"PAYSERVER_CONFIG": writeTemp(t, "channels:\n  WECHAT:\n    unknownOutcome: {closeAfter: -1s}\n")})); err == nil {
		t.Error("a negative closeAfter was taken")
	}
}
