package httpapi_test

import (
	"encoding/json"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"payserver/internal/console/consoletest"
	"payserver/internal/httpapi"
	"payserver/internal/limits"
	"payserver/internal/whatif"
)

// keysOf returns the names of a JSON object's members, sorted.
func keysOf(t *testing.T, v any) []string {
	t.Helper()
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("%v is not an object", v)
	}
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestWhatIfRoute: POST /limits/what-if is an admin route answering the
// replay in exactly the JSON of `payserver what-if --json`, 400 naming the
// reason for a document the server would refuse, and 400 naming the cap
// and the CLI for a range over PAYSERVER_WHATIF_MAX_DECISIONS.
func TestWhatIfRoute(t *testing.T) {
	svc, at := consoletest.WhatIfFixture(t)
	route := func(maxDecisions int64) *consoletest.Server {
		return consoletest.ServeAdmin(t, "tok", consoletest.MustWhatIfRoute(t, httpapi.WhatIfOptions{
			Service: svc, MaxDecisions: maxDecisions, Logger: slog.New(slog.DiscardHandler), Now: func() time.Time { return consoletest.Now },
		}))
	}
	s := route(10)
	const lower = "limits:\n  ONLINE_PAY:ALIPAY: 1\n"

	for _, token := range []string{"", "wrong"} {
		if a := s.Post(t, "/limits/what-if", token, lower); a.Status != 401 {
			t.Errorf("token %q: %d %s, want 401", token, a.Status, a.Body)
		}
	}

	a := s.Post(t, "/limits/what-if", "tok", lower)
	if a.Status != 200 {
		t.Fatalf("%d %s, want 200", a.Status, a.Body)
	}
	var raw map[string]any
	if err := json.Unmarshal([]byte(a.Body), &raw); err != nil {
		t.Fatal(err)
	}
	type shape struct {
		name string
		v    any
		want []string
	}
	shapes := []shape{{"answer", raw, []string{"fidelity", "from", "keys", "proposedVersion", "to"}}}
	keys, _ := raw["keys"].([]any)
	if len(keys) != 1 {
		t.Fatalf("keys %v, want ONLINE_PAY:ALIPAY alone", raw["keys"])
	}
	k := keys[0].(map[string]any)
	shapes = append(shapes,
		shape{"key", k, []string{"actual", "key", "merchants", "minutes", "newlyAdmitted", "newlyRefused", "offered", "proposed"}},
		shape{"actual", k["actual"], []string{"admitted", "refused"}},
		shape{"proposed", k["proposed"], []string{"admitted", "refused"}})
	if ms, _ := k["merchants"].([]any); len(ms) == 1 {
		shapes = append(shapes, shape{"merchant", ms[0], []string{"merchantId", "newlyRefused"}})
	} else {
		t.Errorf("merchants %v, want M2 alone", k["merchants"])
	}
	if ms, _ := k["minutes"].([]any); len(ms) == 1 {
		shapes = append(shapes, shape{"minute", ms[0], []string{"actualAdmitted", "at", "offered", "proposedAdmitted"}})
	} else {
		t.Errorf("minutes %v, want the one minute of traffic", k["minutes"])
	}
	for _, sh := range shapes {
		if got := keysOf(t, sh.v); !slices.Equal(got, sh.want) {
			t.Errorf("%s has members %v, want exactly %v", sh.name, got, sh.want)
		}
	}

	var res whatif.Result
	if err := json.Unmarshal([]byte(a.Body), &res); err != nil {
		t.Fatal(err)
	}
	proposed, err := limits.Parse([]byte(lower))
	if err != nil {
		t.Fatal(err)
	}
	if !res.From.Equal(consoletest.Now.Add(-24*time.Hour)) || !res.To.Equal(consoletest.Now) {
		t.Errorf("range [%v, %v), want the last 24 hours before %v", res.From, res.To, consoletest.Now)
	}
	if res.ProposedVersion != proposed.Config.Version || res.Fidelity != 1 {
		t.Errorf("proposedVersion %q fidelity %v, want %q and 1", res.ProposedVersion, res.Fidelity, proposed.Config.Version)
	}
	want := whatif.KeyResult{
		Key: "ONLINE_PAY:ALIPAY", Offered: 3, Actual: whatif.Counts{Admitted: 2, Refused: 1}, Proposed: whatif.Counts{Admitted: 1, Refused: 2},
		NewlyRefused: 1, Merchants: []whatif.Merchant{{MerchantID: "M2", NewlyRefused: 1}},
		Minutes: []whatif.Minute{{At: at, Offered: 3, ActualAdmitted: 2, ProposedAdmitted: 1}},
	}
	got := res.Keys[0]
	if got.Key != want.Key || got.Offered != want.Offered || got.Actual != want.Actual || got.Proposed != want.Proposed ||
		got.NewlyRefused != want.NewlyRefused || got.NewlyAdmitted != want.NewlyAdmitted ||
		!slices.Equal(got.Merchants, want.Merchants) || len(got.Minutes) != 1 || !got.Minutes[0].At.Equal(at) ||
		got.Minutes[0].Offered != 3 || got.Minutes[0].ActualAdmitted != 2 || got.Minutes[0].ProposedAdmitted != 1 {
		t.Errorf("key %+v, want %+v", got, want)
	}

	// A range without the traffic replays nothing.
	if a := s.Post(t, "/limits/what-if?from="+consoletest.Now.Add(-10*time.Minute).Format(time.RFC3339)+"&to="+consoletest.Now.Format(time.RFC3339), "tok", lower); a.Status != 200 || !strings.Contains(a.Body, `"keys":[]`) {
		t.Errorf("an empty range: %d %s, want 200 and no keys", a.Status, a.Body)
	}

	t.Run("refused document", func(t *testing.T) {
		const bad = "limits:\n  ONLINE_PAY:ALIPAY: 1\nunknownField: 3\n"
		_, perr := limits.Parse([]byte(bad))
		if perr == nil {
			t.Fatal("limits.Parse takes the document the test means the server to refuse")
		}
		a := s.Post(t, "/limits/what-if", "tok", bad)
		code, fields := errorOf(t, a)
		if a.Status != 400 || code != "INVALID_REQUEST" || !slices.Contains(fields, "document") {
			t.Errorf("%d %s, want 400 INVALID_REQUEST naming document", a.Status, a.Body)
		}
		var e struct {
			Details struct {
				Fields []struct{ Field, Reason string }
			}
		}
		if err := json.Unmarshal([]byte(a.Body), &e); err != nil || len(e.Details.Fields) != 1 || e.Details.Fields[0].Reason != perr.Error() {
			t.Errorf("%s: want the reason %q", a.Body, perr)
		}
	})

	t.Run("over the cap", func(t *testing.T) {
		a := route(2).Post(t, "/limits/what-if", "tok", lower)
		if a.Status != 400 || !strings.Contains(a.Body, "PAYSERVER_WHATIF_MAX_DECISIONS (2)") || !strings.Contains(a.Body, "payserver what-if") {
			t.Errorf("3 decisions over a cap of 2: %d %s, want 400 naming the cap and the CLI", a.Status, a.Body)
		}
		if a := route(3).Post(t, "/limits/what-if", "tok", lower); a.Status != 200 {
			t.Errorf("3 decisions at a cap of 3: %d %s, want 200", a.Status, a.Body)
		}
	})
}
