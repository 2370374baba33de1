package ratelimit

import (
	"strings"
	"testing"
	"time"
)

func TestParseDocumentValid(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		key  string
		want Rule
	}{
		{"bare number uses default window", "window: 1s\nlimits:\n  ONLINE_PAY:ALIPAY: 100\n", "ONLINE_PAY:ALIPAY",
			Rule{Windows: []Window{{Limit: 100, Size: time.Second}}}},
		{"minus one is unlimited", "limits:\n  ONLINE_PAY:WECHAT: -1\n", "ONLINE_PAY:WECHAT", Rule{}},
		{"zero is closed, not unlimited", "limits:\n  A:B: 0\n", "A:B", Rule{Windows: []Window{{Limit: 0, Size: time.Second}}}},
		{"custom default window", "window: 1m\nlimits:\n  A:B: 5\n", "A:B", Rule{Windows: []Window{{Limit: 5, Size: time.Minute}}}},
		{"several windows sorted", "limits:\n  REFUND:ALIPAY:\n    - {limit: 600, window: 1m}\n    - {limit: 20, window: 1s}\n", "REFUND:ALIPAY",
			Rule{Windows: []Window{{Limit: 20, Size: time.Second}, {Limit: 600, Size: time.Minute}}}},
		{"days", "limits:\n  A:B: [{limit: 10000, window: 1d}]\n", "A:B", Rule{Windows: []Window{{Limit: 10000, Size: 24 * time.Hour}}}},
		{"object with shadow", "limits:\n  A:B: {limit: 5, window: 500ms, shadow: true}\n", "A:B",
			Rule{Windows: []Window{{Limit: 5, Size: 500 * time.Millisecond}}, Shadow: true}},
		{"windows object with shadow", "limits:\n  A:B: {shadow: true, windows: [{limit: 5, window: 1s}]}\n", "A:B",
			Rule{Windows: []Window{{Limit: 5, Size: time.Second}}, Shadow: true}},
		{"unlimited window dropped", "limits:\n  A:B: [{limit: -1, window: 1s}, {limit: 9, window: 1m}]\n", "A:B",
			Rule{Windows: []Window{{Limit: 9, Size: time.Minute}}}},
		{"flat countLimitMap", `{"ONLINE_PAY:ALIPAY": 100, "ONLINE_PAY:WECHAT": -1}`, "ONLINE_PAY:ALIPAY",
			Rule{Windows: []Window{{Limit: 100, Size: time.Second}}}},
		{"json structured", `{"window":"2s","limits":{"A:B":3}}`, "A:B", Rule{Windows: []Window{{Limit: 3, Size: 2 * time.Second}}}},
		{"whole float accepted", `{"A:B": 3.0}`, "A:B", Rule{Windows: []Window{{Limit: 3, Size: time.Second}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := ParseDocument([]byte(tt.doc))
			if err != nil {
				t.Fatalf("ParseDocument: %v", err)
			}
			k, _ := ParseKey(tt.key)
			got := cfg.RuleAt(k, time.Now())
			if !equalRule(got, tt.want) {
				t.Fatalf("rule %s = %+v, want %+v", tt.key, got, tt.want)
			}
		})
	}
}

func TestParseDocumentMissingKeyIsUnlimited(t *testing.T) {
	cfg, err := ParseDocument([]byte("limits:\n  A:B: 1\n"))
	if err != nil {
		t.Fatal(err)
	}
	if r := cfg.RuleAt(Key{"X", "Y"}, time.Now()); !r.IsUnlimited() {
		t.Fatalf("missing key rule = %+v, want unlimited", r)
	}
	var nilCfg *Config
	if r := nilCfg.RuleAt(Key{"A", "B"}, time.Now()); !r.IsUnlimited() {
		t.Fatalf("nil config rule = %+v, want unlimited", r)
	}
}

func TestParseDocumentGlobalShadow(t *testing.T) {
	cfg, err := ParseDocument([]byte("shadow: true\nlimits:\n  A:B: 1\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.RuleAt(Key{"A", "B"}, time.Now()).Shadow {
		t.Fatal("global shadow not applied to key")
	}
}

func TestParseDocumentInvalid(t *testing.T) {
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

func TestKeysNeverCollide(t *testing.T) {
	// The seed design concatenated bizType and channel with no separator, so
	// "AB"+"C" and "A"+"BC" shared a counter.
	s := &RedisStore{prefix: DefaultKeyPrefix}
	w := Window{Limit: 1, Size: time.Second}
	a := s.RedisKey(KeyWindow{Key: Key{"AB", "C"}, Window: w})
	b := s.RedisKey(KeyWindow{Key: Key{"A", "BC"}, Window: w})
	c := s.RedisKey(KeyWindow{Key: Key{"A", "B"}, Window: w})
	if a == b || b == c {
		t.Fatalf("keys collide: %s, %s, %s", a, b, c)
	}
	// Every key of a channel, its channel-wide key's included, shares the
	// channel's hash tag (one Cluster slot, one script call).
	if wide := s.RedisKey(KeyWindow{Key: ChannelWide("C"), Window: w}); !strings.Contains(a, "{C}") || !strings.Contains(wide, "{C}") {
		t.Fatalf("keys %s, %s lack the hash tag {C}", a, wide)
	}
}

func equalRule(a, b Rule) bool {
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

// refusal is a document ParseDocument must refuse, with a part of the
// error it must give.
type refusal struct{ name, doc, wantErr string }

// testRefusals runs each refusal as a subtest.
func testRefusals(t *testing.T, tests []refusal) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := ParseDocument([]byte(tt.doc))
			if err == nil {
				t.Fatalf("ParseDocument(%q) = %+v, want error containing %q", tt.doc, cfg, tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %q does not contain %q", err, tt.wantErr)
			}
		})
	}
}
