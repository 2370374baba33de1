package limits

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"payserver/internal/ratelimit"
)

func TestParseMerchants(t *testing.T) {
	key := ratelimit.Key{BizType: "PAY", Channel: "U"}
	tests := []struct {
		name string
		doc  string
		// want is each window's merchant limits, printed ("<nil>" for none).
		want string
	}{
		{"perMerchant and overrides", "limits:\n  PAY:U: [{limit: 100, window: 1s, perMerchant: 10, merchants: {M_VIP: 40, BAD: 0, FREE: -1}}]\n",
			"[{10 map[BAD:0 FREE:-1 M_VIP:40]}]"},
		{"overrides only: no limit for the rest", "limits:\n  PAY:U: [{limit: 100, merchants: {M1: 5}}]\n", "[{-1 map[M1:5]}]"},
		{"perMerchant only", "limits:\n  PAY:U: {amount: 5000, calendar: day, perMerchant: 1000}\n", "[{1000 map[]}]"},
		{"follows the sort, one window only", "limits:\n  PAY:U: [{limit: 900, window: 1m, perMerchant: 30}, {limit: 20, window: 1s}]\n", "[<nil> {30 map[]}]"},
		{"merchant IDs are free text", "limits:\n  PAY:U: [{limit: 9, merchants: {\"m:{x}@y\": 2, \"-\": 1}}]\n", "[{-1 map[-:1 m:{x}@y:2]}]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc, err := Parse([]byte(tt.doc))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if got := printMerchants(doc.Config.Rules[key]); got != tt.want {
				t.Errorf("merchants = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestParseMerchantsOnChannelWideKeyAndSchedule(t *testing.T) {
	doc, err := Parse([]byte("limits:\n  \"*:U\": [{limit: 9, perMerchant: 3}]\nschedules:\n  - {key: \"*:U\", from: \"2026-01-01T00:00:00Z\", to: \"2026-01-02T00:00:00Z\", limits: [{limit: 9, perMerchant: 5, merchants: {M: 0}}]}\n"))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	wide := ratelimit.ChannelWide("U")
	if got, want := printMerchants(doc.Config.Rules[wide]), "[{3 map[]}]"; got != want {
		t.Errorf("base merchants = %s, want %s", got, want)
	}
	at := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	if got, want := printMerchants(doc.Config.RuleAt(wide, at)), "[{5 map[M:0]}]"; got != want {
		t.Errorf("scheduled merchants = %s, want %s", got, want)
	}
}

func printMerchants(r ratelimit.Rule) string {
	if r.Merchants == nil {
		return "<nil>"
	}
	out := "["
	for i, m := range r.Merchants {
		if i > 0 {
			out += " "
		}
		if m == nil {
			out += "<nil>"
			continue
		}
		if m.Overrides == nil {
			m.Overrides = map[string]int64{}
		}
		out += fmt.Sprint(*m)
	}
	return out + "]"
}

func TestParseMerchantRefusals(t *testing.T) {
	testRefusals(t, []refusal{
		{"perMerchant above the limit", "limits:\n  PAY:U: [{limit: 10, perMerchant: 11}]\n", `key "PAY:U": window 1: perMerchant 11 is too large; at most 10`},
		{"perMerchant below -1", "limits:\n  PAY:U: [{limit: 10, perMerchant: -2}]\n", "perMerchant -2: want 0..10"},
		{"perMerchant a string", "limits:\n  PAY:U: [{limit: 10, perMerchant: \"5\"}]\n", "not a string"},
		{"override above the limit", "limits:\n  PAY:U: [{limit: 10, merchants: {M: 11}}]\n", "merchants: merchants M 11 is too large"},
		{"merchants not a map", "limits:\n  PAY:U: [{limit: 10, merchants: [M]}]\n", "merchants: want a map"},
		{"empty merchants", "limits:\n  PAY:U: [{limit: 10, merchants: {}}]\n", "merchants: want a map"},
		{"unquoted numeric merchant ID", "limits:\n  PAY:U: [{limit: 10, merchants: {M1: 2, 00123: 5}}]\n", `a merchant ID was read as the number 83, not as text: quote each merchant ID as written, such as {"00123": 40}`},
		{"unquoted boolean merchant ID", "limits:\n  PAY:U: [{limit: 10, merchants: {yes: 5, true: 1}}]\n", "a merchant ID was read as the boolean true, not as text"},
		{"unquoted null merchant ID", "limits:\n  PAY:U: [{limit: 10, merchants: {~: 1}}]\n", "a merchant ID was read as null, not as text"},
		{"merchant ID too long", "limits:\n  PAY:U: [{limit: 10, merchants: {M" + strings.Repeat("x", 64) + ": 1}}]\n", "must be 1..64 characters"},
		{"on an unlimited window", "limits:\n  PAY:U: [{limit: -1, perMerchant: 1}]\n", "merchant limits on an unlimited window"},
		{"on a RESOLVE key", "limits:\n  RESOLVE:U: [{limit: 10, perMerchant: 1}]\n", "merchant limits on RESOLVE:U"},
		{"misspelt", "limits:\n  PAY:U: [{limit: 10, perMerchants: 1}]\n", `unknown field "perMerchants"`},
		{"in a schedule", "limits:\n  PAY:U: 1\nschedules:\n  - {key: PAY:U, from: \"2026-01-01T00:00:00Z\", to: \"2026-01-02T00:00:00Z\", limits: {limit: 5, perMerchant: 6}}\n", "perMerchant 6 is too large"},
	})
}
