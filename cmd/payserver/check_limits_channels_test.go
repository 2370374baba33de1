package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestCheckLimitsRefusesUnknownRouteChannels: check-limits reads the
// channels the server would have (its config file and PAYSERVER_CHANNELS,
// or --channels) and refuses, exit 1, a route naming another channel, as
// the server would refuse the document.
func TestCheckLimitsRefusesUnknownRouteChannels(t *testing.T) {
	doc := writeTemp(t, "limits:\n  ONLINE_PAY:ALIPAY: 5\nroutes:\n  ONLINE_PAY: [ALIPAY, PAYPAL]\n")
	for _, tt := range []struct {
		name     string
		env      map[string]string
		flags    []string
		wantCode int
	}{
		{"default channels", nil, nil, 1},
		{"PAYSERVER_CHANNELS has it", map[string]string{"PAYSERVER_CHANNELS": "ALIPAY,PAYPAL"}, nil, 0},
		{"PAYSERVER_CHANNELS lacks it", map[string]string{"PAYSERVER_CHANNELS": "ALIPAY,WECHAT"}, nil, 1},
		{"--channels has it", nil, []string{"--channels", "ALIPAY,PAYPAL"}, 0},
		{"--channels overrides PAYSERVER_CHANNELS", map[string]string{"PAYSERVER_CHANNELS": "ALIPAY,PAYPAL"}, []string{"--channels=ALIPAY"}, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			args := append([]string{"check-limits", doc}, tt.flags...)
			code := run(args, envFrom(tt.env), &out, &errOut)
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d\nstdout %s\nstderr %s", code, tt.wantCode, out.String(), errOut.String())
			}
			if code == 1 && !strings.Contains(errOut.String(), "PAYPAL") {
				t.Errorf("the refusal does not name PAYPAL: %s", errOut.String())
			}
		})
	}
}

// TestCheckLimitsJSONWithoutAt: --json alone answers for now; it lists every
// key of the document, unlimited ones included, and the routes.
func TestCheckLimitsJSONWithoutAt(t *testing.T) {
	doc := writeTemp(t, "limits:\n  ONLINE_PAY:ALIPAY: [{amount: 500000000, calendar: day, currency: CNY, zone: Asia/Shanghai}]\n  REFUND:ALIPAY: -1\nroutes:\n  ONLINE_PAY: [ALIPAY, WECHAT]\n")
	var out, errOut bytes.Buffer
	before := time.Now().Add(-time.Second)
	if code := run([]string{"check-limits", doc, "--json"}, envFrom(nil), &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var got struct {
		At   time.Time
		Keys []struct {
			Key       string
			Unlimited bool
			Windows   []struct {
				Amount      *int64
				AmountMajor string
			}
		}
		Routes map[string][]string
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if got.At.Before(before) || got.At.After(time.Now().Add(time.Second)) {
		t.Errorf("at %v, want now", got.At)
	}
	if len(got.Keys) != 2 || got.Keys[0].Key != "ONLINE_PAY:ALIPAY" || got.Keys[1].Key != "REFUND:ALIPAY" || !got.Keys[1].Unlimited || got.Keys[0].Unlimited {
		t.Errorf("keys %+v, want ONLINE_PAY:ALIPAY limited and REFUND:ALIPAY unlimited", got.Keys)
	}
	if w := got.Keys[0].Windows; len(w) != 1 || *w[0].Amount != 500000000 || w[0].AmountMajor != "5000000.00" {
		t.Errorf("ONLINE_PAY:ALIPAY windows %+v, want amount 500000000 (5000000.00)", w)
	}
	if r := got.Routes["ONLINE_PAY"]; len(r) != 2 || r[0] != "ALIPAY" || r[1] != "WECHAT" {
		t.Errorf("routes %v", got.Routes)
	}
}
