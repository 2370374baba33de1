package console

import (
	"fmt"
	"math"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"payserver/internal/apperr"
	"payserver/internal/httpapi"
	"payserver/internal/ratelimit"
	"payserver/internal/stats"
)

// Paging of GET /dashboard.
const (
	dashDefaultPageSize = 50
	dashMaxPageSize     = 200
)

// dashQuery is the dashboard's filter and page.
type dashQuery struct {
	BizType, Channel string
	Page, PageSize   int
}

// parseDashQuery validates bizType and channel (a code or "other"), page
// (from 1) and pageSize (1..dashMaxPageSize); unknown or repeated
// parameters are refused too. Empty values are the same as absent. The
// query returned holds the valid parameters, and the default in place of
// each refused one.
func parseDashQuery(v url.Values) (dashQuery, []apperr.FieldError) {
	q := dashQuery{Page: 1, PageSize: dashDefaultPageSize}
	bad := httpapi.CheckParams(v, []string{"bizType", "channel", "page", "pageSize"}, "bizType, channel, page, pageSize")
	for _, p := range []struct {
		name string
		dst  *string
	}{{"bizType", &q.BizType}, {"channel", &q.Channel}} {
		s := v.Get(p.name)
		if s != "" && s != stats.Other {
			if reason := ratelimit.CodeProblem(s); reason != "" {
				bad = append(bad, apperr.FieldError{Field: p.name, Reason: reason + ` (or is "other")`})
				continue
			}
		}
		*p.dst = s
	}
	for _, p := range []struct {
		name     string
		dst      *int
		min, max int
	}{{"page", &q.Page, 1, math.MaxInt32}, {"pageSize", &q.PageSize, 1, dashMaxPageSize}} {
		s := v.Get(p.name)
		if s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < p.min || n > p.max {
			reason := "must be a whole number from 1"
			if p.max != math.MaxInt32 {
				reason += " to " + strconv.Itoa(p.max)
			}
			bad = append(bad, apperr.FieldError{Field: p.name, Reason: reason})
			continue
		}
		*p.dst = n
	}
	return q, bad
}

// matches reports whether a key "BIZ:CH" passes the filter.
func (q dashQuery) matches(key string) bool {
	biz, ch, _ := strings.Cut(key, ":")
	return (q.BizType == "" || q.BizType == biz) && (q.Channel == "" || q.Channel == ch)
}

// keys returns the sorted keys the filter selects: those the document
// names (in its rules or schedules), those the rows of the keys it does not
// name show ("other" buckets), and those whose limit changed in the hour (a
// key removed from the document keeps its chart for the hour).
func (q dashQuery) keys(cfg *ratelimit.Config, others []stats.ReportRow, changes []stats.KeyChange) []string {
	set := map[string]bool{}
	if cfg != nil {
		for k := range cfg.Rules {
			if s := k.String(); q.matches(s) {
				set[s] = true
			}
		}
		for _, sc := range cfg.Schedules {
			if s := sc.Key.String(); q.matches(s) {
				set[s] = true
			}
		}
	}
	for _, r := range others {
		if k := r.BizType + ":" + r.Channel; q.matches(k) {
			set[k] = true
		}
	}
	for _, c := range changes {
		if k := c.Key.String(); q.matches(k) {
			set[k] = true
		}
	}
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// page returns the keys of the page asked for and the paging links.
func (q dashQuery) page(keys []string) ([]string, pagingView) {
	p := pagingView{Total: len(keys)}
	start := min((q.Page-1)*q.PageSize, len(keys))
	end := min(start+q.PageSize, len(keys))
	if end > start {
		p.First, p.Last = start+1, end
	}
	if q.Page > 1 && start > 0 {
		p.Prev = q.atPage(q.Page - 1).link()
	}
	if end < len(keys) {
		p.Next = q.atPage(q.Page + 1).link()
	}
	return keys[start:end], p
}

// atPage returns q at another page.
func (q dashQuery) atPage(page int) dashQuery {
	q.Page = page
	return q
}

// link returns the dashboard's address for q.
func (q dashQuery) link() string {
	v := url.Values{"page": {strconv.Itoa(q.Page)}, "pageSize": {strconv.Itoa(q.PageSize)}}
	if q.BizType != "" {
		v.Set("bizType", q.BizType)
	}
	if q.Channel != "" {
		v.Set("channel", q.Channel)
	}
	return "/dashboard?" + v.Encode()
}

// dashInput is the filter as typed, shown back in the form.
type dashInput struct {
	BizType, Channel string
}

// filterProblem is one refused parameter of the dashboard, said on the
// page. Suggest, when set, is a link to the page with the value corrected
// (a code typed in lower case).
type filterProblem struct {
	Text, Suggest, SuggestValue string
}

// filterProblems words the refused parameters for the page: what was given,
// why it is refused and what the page shows instead.
func filterProblems(bad []apperr.FieldError, v url.Values, q dashQuery) []filterProblem {
	out := make([]filterProblem, 0, len(bad))
	for _, f := range bad {
		p := filterProblem{Text: fmt.Sprintf("%s %q %s", f.Field, v.Get(f.Field), f.Reason)}
		switch f.Field {
		case "bizType", "channel":
			p.Text += fmt.Sprintf("; showing every %s.", f.Field)
			if up := strings.ToUpper(v.Get(f.Field)); ratelimit.CodeProblem(up) == "" && len(v[f.Field]) == 1 {
				fixed := q
				if f.Field == "bizType" {
					fixed.BizType = up
				} else {
					fixed.Channel = up
				}
				p.Suggest, p.SuggestValue = fixed.atPage(1).link(), up
			}
		case "page", "pageSize":
			p.Text += fmt.Sprintf("; showing page %d of %d keys.", q.Page, q.PageSize)
		default:
			p.Text += "; it is ignored."
		}
		out = append(out, p)
	}
	return out
}
