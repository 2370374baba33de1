package limits

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"payserver/internal/ratelimit"
)

// MaxRouteCandidates is the most channels one route may list.
const MaxRouteCandidates = 8

// Routes maps a bizType to the channels a payment of that bizType without a
// channel may go to, in order of preference. A bizType it does not name has
// no route. Every list is non-empty, without repeats, of valid codes.
type Routes map[string][]string

// Route returns the candidates of bizType in order of preference, or nil
// when the document routes no payment of that bizType (also for a nil
// Document). The slice is shared: callers must not modify it.
func (d *Document) Route(bizType string) []string {
	if d == nil {
		return nil
	}
	return d.Routes[bizType]
}

// parseRoutes reads the document's routes map:
//
//	routes:
//	  ONLINE_PAY: [ALIPAY, WECHAT, UNIONPAY]
//
// Every problem is reported, sorted by bizType.
func parseRoutes(v any) (Routes, error) {
	if v == nil {
		return Routes{}, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("routes: want a map of BIZTYPE to a list of channels")
	}
	names := make([]string, 0, len(m))
	for name := range m {
		names = append(names, name)
	}
	sort.Strings(names)
	routes := make(Routes, len(m))
	var problems []string
	for _, biz := range names {
		list, err := parseRoute(biz, m[biz])
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		routes[biz] = list
	}
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "; "))
	}
	return routes, nil
}

func parseRoute(biz string, v any) ([]string, error) {
	if reason := ratelimit.CodeProblem(biz); reason != "" {
		return nil, fmt.Errorf("routes: bizType %q %s", biz, reason)
	}
	if biz == ratelimit.ResolveBizType {
		return nil, fmt.Errorf("routes: %s is the resolver's reserved bizType: no payment is routed under it", biz)
	}
	items, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("routes: %s: want a list of channels, such as [ALIPAY, WECHAT]", biz)
	}
	if len(items) == 0 || len(items) > MaxRouteCandidates {
		return nil, fmt.Errorf("routes: %s: want 1..%d channels, got %d", biz, MaxRouteCandidates, len(items))
	}
	list := make([]string, 0, len(items))
	seen := map[string]bool{}
	for _, item := range items {
		ch, ok := item.(string)
		if !ok {
			return nil, fmt.Errorf("routes: %s: channel %v: want a channel code", biz, item)
		}
		if reason := ratelimit.CodeProblem(ch); reason != "" {
			return nil, fmt.Errorf("routes: %s: channel %q %s", biz, ch, reason)
		}
		if seen[ch] {
			return nil, fmt.Errorf("routes: %s: channel %s listed twice", biz, ch)
		}
		seen[ch] = true
		list = append(list, ch)
	}
	return list, nil
}

// CheckRouteChannels refuses routes that name a channel known does not
// accept (a channel this server is not configured with), naming the bizType
// and the channel. The live loader calls it with the registered channels;
// a nil Document has nothing to check.
func (d *Document) CheckRouteChannels(known func(code string) bool) error {
	if d == nil {
		return nil
	}
	bizTypes := make([]string, 0, len(d.Routes))
	for biz := range d.Routes {
		bizTypes = append(bizTypes, biz)
	}
	sort.Strings(bizTypes)
	var problems []string
	for _, biz := range bizTypes {
		for _, ch := range d.Routes[biz] {
			if !known(ch) {
				problems = append(problems, fmt.Sprintf("routes: %s: unknown channel %s", biz, ch))
			}
		}
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}
