package integration

import (
	"fmt"
	"sync"
	"testing"

	"payserver/internal/testutil"
)

// TestExactAtDefaultsUnderLoad: three instances on one MariaDB and Redis,
// at the shipped limiter settings (50 ms timeout, near-cache and coalescing
// on, policy local), 192 concurrent callers send 3,000 payments to a key of
// 200 per minute. Exactly 200 are admitted: a check whose Redis answer comes
// late is asked again with the same requestId, never decided in process, so
// a timeout cannot become an extra admission (nor, when the retry answers,
// a lost one). Binaries without the race detector: this is a load test.
func TestExactAtDefaultsUnderLoad(t *testing.T) {
	biz := testutil.UniqueName("LOAD")
	limits := fmt.Sprintf("limits:\n  %s:ALIPAY: [{limit: 200, window: 1m}]\n", biz)
	dsn := testutil.MustFreshMySQL(t)
	var servers []*server
	for i := 0; i < 3; i++ {
		servers = append(servers, startServer(t, serverOptions{Limits: limits, DSN: dsn, Fast: true}))
	}
	var mu sync.Mutex
	statuses := map[int]int{}
	parallel(3000, 192, func(i int) {
		r := servers[i%3].pay(t, payBody(fmt.Sprintf("load-%d", i), biz, "ALIPAY"))
		mu.Lock()
		statuses[r.Status]++
		mu.Unlock()
	})
	var degraded, failed float64
	for _, s := range servers {
		degraded += s.metric(t, "payserver_limiter_degraded_total")
		failed += s.metric(t, "payserver_limiter_redis_errors_total")
	}
	t.Logf("statuses %v; degraded decisions %v, failed Redis calls %v", statuses, degraded, failed)
	if statuses[200] != 200 || statuses[429] != 2800 {
		t.Fatalf("statuses %v, want exactly 200 x 200 and 2800 x 429", statuses)
	}
	var orders int
	dbScan(t, dsn, "SELECT COUNT(*) FROM orders WHERE biz_type = '"+biz+"'", func(scan func(...any) error) error { return scan(&orders) })
	if orders != 200 {
		t.Fatalf("%d orders stored, want 200", orders)
	}
}
