package limits

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseRoutes(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want Routes
	}{
		{"yaml lists", "routes:\n  ONLINE_PAY: [ALIPAY, WECHAT, UNIONPAY]\n  REFUND: [WECHAT]\nlimits:\n  A:B: 1\n",
			Routes{"ONLINE_PAY": {"ALIPAY", "WECHAT", "UNIONPAY"}, "REFUND": {"WECHAT"}}},
		{"json", `{"routes":{"ONLINE_PAY":["WECHAT","ALIPAY"]},"limits":{"A:B":1}}`, Routes{"ONLINE_PAY": {"WECHAT", "ALIPAY"}}},
		{"empty map", "routes: {}\nlimits:\n  A:B: 1\n", Routes{}},
		{"none", "limits:\n  A:B: 1\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc, err := Parse([]byte(tt.doc))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(doc.Routes, tt.want) {
				t.Fatalf("got %v, want %v", doc.Routes, tt.want)
			}
		})
	}
}

func TestParseRoutesRefuses(t *testing.T) {
	tests := []struct {
		name, doc, want string
	}{
		{"not a map", "routes: [A]\nlimits:\n  A:B: 1\n", "routes: want a map"},
		{"not a list", "routes:\n  P: ALIPAY\nlimits:\n  A:B: 1\n", "routes: P: want a list"},
		{"empty list", "routes:\n  P: []\nlimits:\n  A:B: 1\n", "want 1..8 channels, got 0"},
		{"too many", "routes:\n  P: [A, B, C, D, E, F, G, H, I]\nlimits:\n  A:B: 1\n", "want 1..8 channels, got 9"},
		{"repeat", "routes:\n  P: [A, B, A]\nlimits:\n  A:B: 1\n", "channel A listed twice"},
		{"bad channel", "routes:\n  P: [alipay]\nlimits:\n  A:B: 1\n", `channel "alipay" must contain only A-Z, 0-9 and _`},
		{"number channel", "routes:\n  P: [1]\nlimits:\n  A:B: 1\n", "channel 1: want a channel code"},
		{"bad bizType", "routes:\n  p: [A]\nlimits:\n  A:B: 1\n", `bizType "p" must contain only`},
		{"flat shape", "routes:\n  P: [A]\nA:B: 1\n", `"routes" but no "limits" map`},
		{"every problem", "routes:\n  P: []\n  Q: [A, A]\nlimits:\n  A:B: 1\n", "P: want 1..8 channels, got 0; routes: Q: channel A listed twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.doc))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to say %q", err, tt.want)
			}
		})
	}
}

func TestCheckRouteChannels(t *testing.T) {
	doc, err := Parse([]byte("routes:\n  P: [ALIPAY, XPAY]\n  Q: [YPAY]\nlimits:\n  A:B: 1\n"))
	if err != nil {
		t.Fatal(err)
	}
	known := func(c string) bool { return c == "ALIPAY" }
	err = doc.CheckRouteChannels(known)
	if err == nil || err.Error() != "routes: P: unknown channel XPAY; routes: Q: unknown channel YPAY" {
		t.Fatalf("err = %v", err)
	}
	if got := doc.Route("P"); !reflect.DeepEqual(got, []string{"ALIPAY", "XPAY"}) {
		t.Fatalf("Route(P) = %v", got)
	}
	if got := (*Document)(nil).Route("P"); got != nil {
		t.Fatalf("nil document routes %v", got)
	}
	if err := (*Document)(nil).CheckRouteChannels(known); err != nil {
		t.Fatalf("nil document: %v", err)
	}
}
