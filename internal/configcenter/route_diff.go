package configcenter

import (
	"strings"

	"payserver/internal/limits"
)

// routeDiff lists the routes that differ between two documents' routes as
// "route BIZTYPE: old -> new", each side as DescribeRoute renders it, for
// the audit history beside the keys.
func routeDiff(oldRoutes, curRoutes limits.Routes) []string {
	bizTypes := map[string]bool{}
	for biz := range oldRoutes {
		bizTypes[biz] = true
	}
	for biz := range curRoutes {
		bizTypes[biz] = true
	}
	var out []string
	for biz := range bizTypes {
		o, n := DescribeRoute(oldRoutes[biz]), DescribeRoute(curRoutes[biz])
		if o != n {
			out = append(out, "route "+biz+": "+o+" -> "+n)
		}
	}
	return out
}

// DescribeRoute renders a route's candidates as the document writes them,
// in order of preference: "[ALIPAY, WECHAT, UNIONPAY]"; no candidates
// render "absent".
func DescribeRoute(candidates []string) string {
	if len(candidates) == 0 {
		return "absent"
	}
	return "[" + strings.Join(candidates, ", ") + "]"
}
