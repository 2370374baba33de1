package limits

import (
	"crypto/md5"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"payserver/internal/ratelimit"
)

func TestParseValid(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		key  string
		want ratelimit.Rule
	}{
		{"bare number uses default window", "window: 1s\nlimits:\n  ONLINE_PAY:ALIPAY: 100\n", "ONLINE_PAY:ALIPAY",
			ratelimit.Rule{Windows: []ratelimit.Window{{Limit: 100, Size: time.Second}}}},
		{"minus one is unlimited", "limits:\n  ONLINE_PAY:WECHAT: -1\n", "ONLINE_PAY:WECHAT", ratelimit.Rule{}},
		{"zero is closed, not unlimited", "limits:\n  A:B: 0\n", "A:B", ratelimit.Rule{Windows: []ratelimit.Window{{Limit: 0, Size: time.Second}}}},
		{"custom default window", "window: 1m\nlimits:\n  A:B: 5\n", "A:B", ratelimit.Rule{Windows: []ratelimit.Window{{Limit: 5, Size: time.Minute}}}},
		{"several windows sorted", "limits:\n  REFUND:ALIPAY:\n    - {limit: 600, window: 1m}\n    - {limit: 20, window: 1s}\n", "REFUND:ALIPAY",
			ratelimit.Rule{Windows: []ratelimit.Window{{Limit: 20, Size: time.Second}, {Limit: 600, Size: time.Minute}}}},
		{"days", "limits:\n  A:B: [{limit: 10000, window: 1d}]\n", "A:B", ratelimit.Rule{Windows: []ratelimit.Window{{Limit: 10000, Size: 24 * time.Hour}}}},
		{"object with shadow", "limits:\n  A:B: {limit: 5, window: 500ms, shadow: true}\n", "A:B",
			ratelimit.Rule{Windows: []ratelimit.Window{{Limit: 5, Size: 500 * time.Millisecond}}, Shadow: true}},
		{"windows object with shadow", "limits:\n  A:B: {shadow: true, windows: [{limit: 5, window: 1s}]}\n", "A:B",
			ratelimit.Rule{Windows: []ratelimit.Window{{Limit: 5, Size: time.Second}}, Shadow: true}},
		{"unlimited window dropped", "limits:\n  A:B: [{limit: -1, window: 1s}, {limit: 9, window: 1m}]\n", "A:B",
			ratelimit.Rule{Windows: []ratelimit.Window{{Limit: 9, Size: time.Minute}}}},
		{"flat countLimitMap", `{"ONLINE_PAY:ALIPAY": 100, "ONLINE_PAY:WECHAT": -1}`, "ONLINE_PAY:ALIPAY",
			ratelimit.Rule{Windows: []ratelimit.Window{{Limit: 100, Size: time.Second}}}},
		{"json structured", `{"window":"2s","limits":{"A:B":3}}`, "A:B", ratelimit.Rule{Windows: []ratelimit.Window{{Limit: 3, Size: 2 * time.Second}}}},
		{"whole float accepted", `{"A:B": 3.0}`, "A:B", ratelimit.Rule{Windows: []ratelimit.Window{{Limit: 3, Size: time.Second}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parsed, err := Parse([]byte(tt.doc))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			cfg := parsed.Config
			k, _ := ratelimit.ParseKey(tt.key)
			got := cfg.RuleAt(k, time.Now())
			if !equalRule(got, tt.want) {
				t.Fatalf("rule %s = %+v, want %+v", tt.key, got, tt.want)
			}
		})
	}
}

func TestParseMissingKeyIsUnlimited(t *testing.T) {
	parsed, err := Parse([]byte("limits:\n  A:B: 1\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := parsed.Config
	if r := cfg.RuleAt(ratelimit.Key{BizType: "X", Channel: "Y"}, time.Now()); !r.IsUnlimited() {
		t.Fatalf("missing key rule = %+v, want unlimited", r)
	}
	var nilCfg *ratelimit.Config
	if r := nilCfg.RuleAt(ratelimit.Key{BizType: "A", Channel: "B"}, time.Now()); !r.IsUnlimited() {
		t.Fatalf("nil config rule = %+v, want unlimited", r)
	}
}

func TestParseGlobalShadow(t *testing.T) {
	parsed, err := Parse([]byte("shadow: true\nlimits:\n  A:B: 1\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := parsed.Config
	if !cfg.RuleAt(ratelimit.Key{BizType: "A", Channel: "B"}, time.Now()).Shadow {
		t.Fatal("global shadow not applied to key")
	}
}

func TestParseInvalid(t *testing.T) {
	tests := []refusal{
		{"empty", "", "empty"},
		{"whitespace", "  \n\t", "empty"},
		{"null", "null", "empty"},
		{"no keys", "limits: {}\n", "names no key"},
		{"no limits map", "window: 1s\n", `no "limits"`},
		{"not yaml", "limits: [", "not valid"},
		{"scalar root", "42", "top level must be a map"},
		{"list root", "[1, 2]", "top level must be a map"},
		{"lowercase biz", "limits:\n  online:ALIPAY: 1\n", "bizType"},
		{"no colon", "limits:\n  ONLINEALIPAY: 1\n", "BIZTYPE:CHANNEL"},
		{"brace injection", "limits:\n  \"A}:{B\": 1\n", "must contain only"},
		{"too long", "limits:\n  " + strings.Repeat("A", 33) + ":B: 1\n", "at most 32"},
		{"below minus one", "limits:\n  A:B: -2\n", "want 0.."},
		{"fraction", "limits:\n  A:B: 1.5\n", "whole number"},
		{"string limit", "limits:\n  A:B: \"10\"\n", "not a string"},
		{"huge", "limits:\n  A:B: 100000000000\n", "too large"},
		{"unknown top field", "limits:\n  A:B: 1\nwindwo: 1s\n", "unknown top-level"},
		{"unknown window field", "limits:\n  A:B: [{limit: 1, windo: 1s}]\n", "unknown field"},
		{"missing limit", "limits:\n  A:B: [{window: 1s}]\n", "limit is missing"},
		{"duplicate windows", "limits:\n  A:B: [{limit: 1, window: 1s}, {limit: 2, window: 1000ms}]\n", "two windows"},
		{"window too small", "limits:\n  A:B: [{limit: 1, window: 1ms}]\n", "out of range"},
		{"window too big", "window: 30d\nlimits:\n  A:B: 1\n", "out of range 10ms..7d"},
		{"window of 8 days", "window: 8d\nlimits:\n  A:B: 1\n", "8d is out of range 10ms..7d"},
		{"window of 0 days", "limits:\n  A:B: [{limit: 1, window: 0d}]\n", "0d is out of range 10ms..7d"},
		{"window of 169h", "window: 169h\nlimits:\n  A:B: 1\n", "169h0m0s is out of range 10ms..7d"},
		{"numeric window", "window: 1000\nlimits:\n  A:B: 1\n", "want a duration"},
		{"empty window list", "limits:\n  A:B: []\n", "empty window list"},
		{"one bad key refuses all", "limits:\n  A:B: 1\n  C:D: x\n", "C:D"},
		{"duplicate yaml key", "limits:\n  A:B: 1\n  A:B: 2\n", "not valid"},
	}
	testRefusals(t, tests)
}

func equalRule(a, b ratelimit.Rule) bool {
	if a.Shadow != b.Shadow || len(a.Windows) != len(b.Windows) {
		return false
	}
	for i := range a.Windows {
		if a.Windows[i] != b.Windows[i] {
			return false
		}
	}
	return true
}

// refusal is a document Parse must refuse, with a part of the
// error it must give.
type refusal struct{ name, doc, wantErr string }

// testRefusals runs each refusal as a subtest.
func testRefusals(t *testing.T, tests []refusal) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parsed, err := Parse([]byte(tt.doc))
			if err == nil {
				t.Fatalf("Parse(%q) = %+v, want error containing %q", tt.doc, parsed, tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %q does not contain %q", err, tt.wantErr)
			}
		})
	}
}

// TestParseVersionIsTheMD5: the Config's Version is the hex MD5 of the
// document's bytes (the version the config center shows and records, and
// decisions carry), so a comment-only edit is a new version.
func TestParseVersionIsTheMD5(t *testing.T) {
	for _, data := range []string{"limits:\n  PAY:ALIPAY: 1\n", "limits:\n  PAY:ALIPAY: 1\n# a comment\n"} {
		doc, err := Parse([]byte(data))
		if err != nil {
			t.Fatal(err)
		}
		sum := md5.Sum([]byte(data))
		if got, want := doc.Config.Version, hex.EncodeToString(sum[:]); got != want {
			t.Errorf("Version of %q = %q, want %q", data, got, want)
		}
	}
}

// The adaptive section sets how named keys learn, schedules included, and
// refuses what it cannot mean, naming the key and field.
func TestParseAdaptive(t *testing.T) {
	doc, err := Parse([]byte(`
limits:
  PAY:ALIPAY: 100
  PAY:WECHAT: 50
  REFUND:ALIPAY: 20
schedules:
  - {key: "PAY:WECHAT", from: "2030-01-01T00:00:00Z", to: "2030-01-02T00:00:00Z", limits: 10}
adaptive:
  "PAY:ALIPAY": off
  "PAY:WECHAT": {decrease: 0.5, increase: 0.1, floor: 2}
`))
	if err != nil {
		t.Fatal(err)
	}
	rules := doc.Config.Rules
	if a := rules[ratelimit.Key{BizType: "PAY", Channel: "ALIPAY"}].Adaptive; !a.Off {
		t.Errorf("PAY:ALIPAY %+v, want off", a)
	}
	want := ratelimit.Adaptive{Decrease: 500_000, Increase: 100_000, Floor: 2}
	if a := rules[ratelimit.Key{BizType: "PAY", Channel: "WECHAT"}].Adaptive; a != want {
		t.Errorf("PAY:WECHAT %+v, want %+v", a, want)
	}
	if a := doc.Config.Schedules[0].Rule.Adaptive; a != want {
		t.Errorf("PAY:WECHAT's schedule %+v, want %+v", a, want)
	}
	if a := rules[ratelimit.Key{BizType: "REFUND", Channel: "ALIPAY"}].Adaptive; a != (ratelimit.Adaptive{}) {
		t.Errorf("REFUND:ALIPAY %+v, want the defaults (zero)", a)
	}
	for _, tt := range []struct{ adaptive, want string }{
		{`{"PAY:ALIPAY": on}`, `key "PAY:ALIPAY": want off`},
		{`{"PAY:UNIONPAY": off}`, `key "PAY:UNIONPAY" is not in limits`},
		{`{"PAY:ALIPAY": {decrease: 1}}`, "decrease 1: want a fraction in (0, 1)"},
		{`{"PAY:ALIPAY": {increase: 0}}`, "increase 0: want a fraction in (0, 1]"},
		{`{"PAY:ALIPAY": {floor: 0}}`, "floor 0: want at least 1"},
		{`{"PAY:ALIPAY": {floor: 1.5}}`, "floor 1.5: want a whole number"},
		{`{"PAY:ALIPAY": {speed: 2}}`, `unknown field "speed"`},
		{`[PAY:ALIPAY]`, "adaptive: want a map"},
	} {
		_, err := Parse([]byte("limits:\n  PAY:ALIPAY: 100\nadaptive: " + tt.adaptive + "\n"))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("adaptive %s: %v, want an error containing %q", tt.adaptive, err, tt.want)
		}
	}
}
