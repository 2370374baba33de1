package ratelimit

import "testing"

// FuzzParseDocument: any content either parses to a Config whose every rule
// respects the documented bounds, or is refused with an error. It never
// panics.
func FuzzParseDocument(f *testing.F) {
	for _, s := range []string{
		"window: 1s\nlimits:\n  ONLINE_PAY:ALIPAY: 100\n  ONLINE_PAY:WECHAT: -1\n",
		"limits:\n  REFUND:ALIPAY:\n    - {limit: 20, window: 1s}\n    - {limit: 600, window: 1m}\n",
		`{"A:B": 1, "C:D": -1}`, "limits:\n  A:B: {shadow: true, windows: [{limit: 1, window: 1d}]}\n",
		"", "limits: {}", "&a [*a]", "limits:\n  A:B: 1e300\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := ParseDocument(data)
		if err != nil {
			return
		}
		if len(cfg.Rules) == 0 {
			t.Fatal("accepted a document with no keys")
		}
		for k, r := range cfg.Rules {
			if k.Validate() != nil {
				t.Fatalf("accepted bad key %q", k)
			}
			for i, w := range r.Windows {
				if w.Limit < 0 || w.Limit > MaxLimit || w.Size < MinWindow || w.Size > MaxWindow {
					t.Fatalf("key %s window %+v out of bounds", k, w)
				}
				if i > 0 && w.Size <= r.Windows[i-1].Size {
					t.Fatalf("key %s windows not strictly sorted", k)
				}
			}
		}
	})
}
