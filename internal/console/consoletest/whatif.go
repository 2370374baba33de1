package consoletest

import (
	"context"
	"testing"
	"time"

	"payserver/internal/decisionlog"
	"payserver/internal/httpapi"
	"payserver/internal/limits"
	"payserver/internal/ratelimit"
	"payserver/internal/whatif"
)

// memDecisions is a whatif.Store in memory.
type memDecisions struct {
	entries []decisionlog.Entry
	docs    map[string][]byte
}

func (s *memDecisions) in(f decisionlog.Filter) []decisionlog.Entry {
	var out []decisionlog.Entry
	for _, e := range s.entries {
		if !e.At.Before(f.From) && e.At.Before(f.To) {
			out = append(out, e)
		}
	}
	return out
}

func (s *memDecisions) Stream(_ context.Context, f decisionlog.Filter, fn func(decisionlog.Entry) error) error {
	for _, e := range s.in(f) {
		if err := fn(e); err != nil {
			return err
		}
	}
	return nil
}

func (s *memDecisions) Count(_ context.Context, f decisionlog.Filter) (int64, error) {
	return int64(len(s.in(f))), nil
}

func (s *memDecisions) Documents(context.Context) (map[string][]byte, error) { return s.docs, nil }

// WhatIfFixture returns a what-if service over three decisions of
// ONLINE_PAY:ALIPAY at at (an hour before now) under a limit of 2: M1 and
// M2 admitted, M3 refused. Under a limit of 1, M2 is newly refused.
func WhatIfFixture(t *testing.T) (svc *whatif.Service, at time.Time) {
	t.Helper()
	const inForce = "limits:\n  ONLINE_PAY:ALIPAY: 2\n"
	doc, err := limits.Parse([]byte(inForce))
	if err != nil {
		t.Fatal(err)
	}
	key := ratelimit.Key{BizType: "ONLINE_PAY", Channel: "ALIPAY"}
	at = Now.Add(-time.Hour).Truncate(time.Minute)
	store := &memDecisions{docs: map[string][]byte{doc.Config.Version: []byte(inForce)}}
	for i, o := range []decisionlog.Outcome{decisionlog.Admitted, decisionlog.Admitted, decisionlog.Refused} {
		store.entries = append(store.entries, decisionlog.Entry{
			ID: uint64(i + 1), At: at.Add(time.Duration(i) * time.Millisecond), Kind: decisionlog.KindDecision, Key: key,
			Member: "R-" + string(rune('1'+i)), Merchant: "M" + string(rune('1'+i)), Amount: 1000, Currency: "CNY",
			Outcome: o, Source: ratelimit.SourceRedis, Version: doc.Config.Version,
		})
	}
	svc, err = whatif.NewService(store)
	if err != nil {
		t.Fatal(err)
	}
	return svc, at
}

// MustWhatIfRoute returns httpapi.WhatIfRoute(opts) with the console's
// what-if page on the same options.
func MustWhatIfRoute(t *testing.T, opts httpapi.WhatIfOptions) WhatIfMount {
	t.Helper()
	return WhatIfMount{route: httpapi.WhatIfRoute(opts), opts: opts}
}
