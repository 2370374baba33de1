package limits

import (
	"testing"

	"payserver/internal/ratelimit"
)

// FuzzParse: any content either parses to a Document whose every rule,
// schedule and route respects the documented bounds, or is refused with an
// error. It never panics.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"window: 1s\nlimits:\n  ONLINE_PAY:ALIPAY: 100\n  ONLINE_PAY:WECHAT: -1\n",
		"limits:\n  REFUND:ALIPAY:\n    - {limit: 20, window: 1s}\n    - {limit: 600, window: 1m}\n",
		`{"A:B": 1, "C:D": -1}`, "limits:\n  A:B: {shadow: true, windows: [{limit: 1, window: 1d}]}\n",
		"", "limits: {}", "&a [*a]", "limits:\n  A:B: 1e300\n",
		issueDocument,
		"zone: Europe/Berlin\nlimits:\n  A:B: [{amount: 5, calendar: month, cutoff: \"02:30\", currency: EUR}]\n",
		"limits:\n  \"*:U\": [{limit: 9, reserve: {A: 4, B: 5}}, {amount: 9, calendar: day, reserve: {A: 9}}]\n",
		"routes:\n  P: [A, B]\nlimits:\n  A:B: 1\n",
		"limits:\n  A:B: 1\nschedules:\n  - {key: A:B, from: \"2026-01-01T00:00:00Z\", to: \"2026-01-02T00:00:00Z\", limits: 0}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		parsed, err := Parse(data)
		if err != nil {
			return
		}
		cfg := parsed.Config
		if len(cfg.Rules) == 0 {
			t.Fatal("accepted a document with no keys")
		}
		if cfg.Zone == nil {
			t.Fatal("accepted a document without a zone")
		}
		for k, r := range cfg.Rules {
			if k.Validate() != nil {
				t.Fatalf("accepted bad key %q", k)
			}
			checkFuzzedRule(t, k, r)
		}
		for i, s := range cfg.Schedules {
			if s.Key.Validate() != nil || !s.From.Before(s.To) {
				t.Fatalf("schedule %+v out of bounds", s)
			}
			if i > 0 {
				p := cfg.Schedules[i-1]
				if p.Key == s.Key && s.From.Before(p.To) {
					t.Fatalf("schedules %+v and %+v overlap", p, s)
				}
				if p.Key.String() > s.Key.String() || p.Key == s.Key && s.From.Before(p.From) {
					t.Fatalf("schedules not sorted: %+v before %+v", p, s)
				}
			}
			checkFuzzedRule(t, s.Key, s.Rule)
		}
		for biz, cands := range parsed.Routes {
			if ratelimit.CodeProblem(biz) != "" || biz == ratelimit.ResolveBizType || len(cands) == 0 || len(cands) > MaxRouteCandidates {
				t.Fatalf("route %q: %v out of bounds", biz, cands)
			}
		}
	})
}

// checkFuzzedRule fails t unless r respects the bounds and order that
// Rule documents.
func checkFuzzedRule(t *testing.T, k ratelimit.Key, r ratelimit.Rule) {
	t.Helper()
	if len(r.Windows) > MaxWindowsPerKey {
		t.Fatalf("key %s: %d windows", k, len(r.Windows))
	}
	if len(r.Reserve) > len(r.Windows) || (len(r.Reserve) > 0 && !k.IsChannelWide()) {
		t.Fatalf("key %s: reserve %v beside %d windows", k, r.Reserve, len(r.Windows))
	}
	for i, w := range r.Windows {
		most := int64(MaxLimit)
		if w.Amount {
			most = MaxAmount
		}
		if w.Limit < 0 || w.Limit > most {
			t.Fatalf("key %s window %+v limit out of bounds", k, w)
		}
		if w.IsCalendar() {
			if w.Size != 0 || w.Calendar.Zone == nil || w.Calendar.Cutoff < 0 || w.Calendar.Cutoff >= 24*60*60*1e9 {
				t.Fatalf("key %s calendar window %+v out of bounds", k, w)
			}
		} else if w.Size < MinWindow || w.Size > MaxWindow {
			t.Fatalf("key %s window %+v out of bounds", k, w)
		}
		if i > 0 && (!windowLess(r.Windows[i-1], w) || r.Windows[i-1].ID() == w.ID()) {
			t.Fatalf("key %s windows not strictly sorted", k)
		}
		if i < len(r.Reserve) {
			var sum int64
			for _, n := range r.Reserve[i] {
				sum += n
			}
			if sum > w.Limit {
				t.Fatalf("key %s window %d reserve %v does not fit %d", k, i, r.Reserve[i], w.Limit)
			}
		}
	}
}
