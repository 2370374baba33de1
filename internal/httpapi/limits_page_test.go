package httpapi_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"payserver/internal/configcenter"
	"payserver/internal/console"
	"payserver/internal/console/consoletest"
	"payserver/internal/httpapi"
	"payserver/internal/limits"
)

// pagedDoc names keys whose text sorts otherwise than their parts: "*"
// before letters, "_" after upper case, and a key only a schedule names.
const pagedDoc = `limits:
  "*:UNIONPAY": 200
  A:ALIPAY: 1
  A_B:ALIPAY: 2
  AB:ALIPAY: 3
  B:WECHAT: 4
  B:ALIPAY: 5
schedules:
  - {key: "C:ALIPAY", from: "2026-12-24T00:00:00Z", to: "2026-12-26T00:00:00Z", limits: 10}
`

// limitsPageJSON is what the paging tests read of GET /limits (limits)
// and GET /channels/usage (keys).
type limitsPageJSON struct {
	Limits []struct{ Key, Rule string }
	Keys   []struct{ Key string }
	Total  int
	Next   *string
}

// pagedRoutes are the routes that page keys, and the keys each lists of
// pagedDoc, in order: GET /channels/usage has no key only a schedule names.
var pagedRoutes = []struct {
	path string
	want []string
}{
	{"/limits", []string{"*:UNIONPAY", "A:ALIPAY", "AB:ALIPAY", "A_B:ALIPAY", "B:ALIPAY", "B:WECHAT", "C:ALIPAY"}},
	{"/channels/usage", []string{"*:UNIONPAY", "A:ALIPAY", "AB:ALIPAY", "A_B:ALIPAY", "B:ALIPAY", "B:WECHAT"}},
}

func pagedServer(t *testing.T) *consoletest.Server {
	t.Helper()
	parsed, err := limits.Parse([]byte(pagedDoc))
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 11, 12, 0, 0, 0, time.UTC)
	lv := consoletest.LimitsView{Cfg: parsed.Config, St: configcenter.Status{Loaded: true, Source: "file"}, Now: at}
	routes, err := console.New(console.Options{Reports: &consoletest.Reports{}, Usage: consoletest.Usage{Cfg: parsed.Config, Now: at}, Limits: lv,
		Logger: slog.New(slog.DiscardHandler), Now: func() time.Time { return at }})
	if err != nil {
		t.Fatal(err)
	}
	h, err := httpapi.New(httpapi.Options{Pay: consoletest.NopPay{}, Logger: slog.New(slog.DiscardHandler), AdminToken: "t", Limits: lv,
		Now: func() time.Time { return at }, Console: routes})
	if err != nil {
		t.Fatal(err)
	}
	return consoletest.ServeHandler(t, h)
}

func getLimitsPage(t *testing.T, s *consoletest.Server, path, query string) (limitsPageJSON, []string) {
	t.Helper()
	a := s.Get(t, path+query, "t")
	if a.Status != 200 {
		t.Fatalf("GET %s%s = %d %s", path, query, a.Status, a.Body)
	}
	var p limitsPageJSON
	if err := json.Unmarshal([]byte(a.Body), &p); err != nil {
		t.Fatal(err)
	}
	keys := []string{}
	for _, l := range p.Limits {
		keys = append(keys, l.Key)
	}
	for _, k := range p.Keys {
		keys = append(keys, k.Key)
	}
	return p, keys
}

// TestLimitsPages: without limit and after GET /limits and GET
// /channels/usage list every key in byte order of their text, with total
// and no next; with them they list one page, and following next walks
// every key once, in the same order, for every page size; after need not
// be a key in force.
func TestLimitsPages(t *testing.T) {
	s := pagedServer(t)
	for _, r := range pagedRoutes {
		t.Run(r.path, func(t *testing.T) { testPages(t, s, r.path, r.want) })
	}
}

func testPages(t *testing.T, s *consoletest.Server, path string, want []string) {
	all, keys := getLimitsPage(t, s, path, "")
	if !reflect.DeepEqual(keys, want) || all.Total != len(want) || all.Next != nil {
		t.Fatalf("unpaged: keys %v, total %d, next %v; want %v, %d, null", keys, all.Total, all.Next, want, len(want))
	}
	for size := 1; size <= len(want)+1; size++ {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			var walked []string
			query := fmt.Sprintf("?limit=%d", size)
			for pages := 0; ; pages++ {
				if pages > len(want) {
					t.Fatalf("no last page after %d pages: %v", pages, walked)
				}
				p, keys := getLimitsPage(t, s, path, query)
				if p.Total != len(want) || len(keys) > size {
					t.Fatalf("%s: %d keys of total %d, want at most %d of %d", query, len(keys), p.Total, size, len(want))
				}
				walked = append(walked, keys...)
				if p.Next == nil {
					break
				}
				if *p.Next != keys[len(keys)-1] {
					t.Fatalf("%s: next %q, want the page's last key %q", query, *p.Next, keys[len(keys)-1])
				}
				query = fmt.Sprintf("?limit=%d&after=%s", size, *p.Next)
			}
			if !reflect.DeepEqual(walked, want) {
				t.Errorf("walked %v, want %v", walked, want)
			}
		})
	}
	for _, c := range []struct {
		query string
		want  []string
		next  string
	}{
		{"?after=A:ALIPAY&limit=2", []string{"AB:ALIPAY", "A_B:ALIPAY"}, "A_B:ALIPAY"},
		{"?after=AA:X", want[2:], ""}, // not a key in force; default page size
		{"?after=C:ALIPAY", []string{}, ""},
		{"?limit=&after=", want, ""}, // empty is absent: every key
		{"?limit=3&after=", want[:3], "AB:ALIPAY"},
	} {
		p, keys := getLimitsPage(t, s, path, c.query)
		next := ""
		if p.Next != nil {
			next = *p.Next
		}
		if !reflect.DeepEqual(keys, c.want) || next != c.next {
			t.Errorf("%s: keys %v next %q, want %v next %q", c.query, keys, next, c.want, c.next)
		}
	}
}

// TestLimitsPageRefusesBadParameters: a bad limit or after, an unknown or
// a repeated parameter is a 400 naming each field and why, on every route
// that pages keys.
func TestLimitsPageRefusesBadParameters(t *testing.T) {
	s := pagedServer(t)
	for _, r := range pagedRoutes {
		t.Run(r.path, func(t *testing.T) { testBadPageParameters(t, s, r.path) })
	}
}

func testBadPageParameters(t *testing.T, s *consoletest.Server, path string) {
	for _, c := range []struct {
		query  string
		fields []string
	}{
		{"?limit=0", []string{"limit"}},
		{"?limit=1001", []string{"limit"}},
		{"?limit=-5", []string{"limit"}},
		{"?limit=ten", []string{"limit"}},
		{"?limit=1.5", []string{"limit"}},
		{"?limit=%2B5", []string{"limit"}},
		{"?limit=007", []string{"limit"}},
		{"?after=ALIPAY", []string{"after"}},
		{"?after=online_pay:ALIPAY", []string{"after"}},
		{"?after=A:ALIPAY:X", []string{"after"}},
		{"?limit=10&limit=20", []string{"limit"}},
		{"?page=2", []string{"page"}},
		{"?limit=0&after=x", []string{"limit", "after"}},
	} {
		a := s.Get(t, path+c.query, "t")
		var body struct {
			Code    string
			Details struct {
				Fields []struct{ Field, Reason string }
			}
		}
		if err := json.Unmarshal([]byte(a.Body), &body); err != nil || a.Status != 400 || body.Code != "INVALID_REQUEST" {
			t.Errorf("%s: %d %s, want 400 INVALID_REQUEST", c.query, a.Status, a.Body)
			continue
		}
		var fields []string
		for _, f := range body.Details.Fields {
			fields = append(fields, f.Field)
			if f.Reason == "" {
				t.Errorf("%s: field %s without a reason", c.query, f.Field)
			}
		}
		if strings.Join(fields, ",") != strings.Join(c.fields, ",") {
			t.Errorf("%s: fields %v, want %v", c.query, fields, c.fields)
		}
	}
}
