package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"payserver/internal/testutil"
)

// TestRedisWithoutPersistenceWarns: with a day cap in force and a Redis that
// keeps neither AOF nor RDB (the test Redis runs with --save "" and
// --appendonly no), payserver stays ready, and /readyz's redis detail, one
// WARN line and payserver_redis_persistence (0) say that a Redis restart
// forgets the calendar caps.
func TestRedisWithoutPersistenceWarns(t *testing.T) {
	biz := testutil.UniqueName("PERSIST")
	s := startServer(t, serverOptions{
		Limits: fmt.Sprintf("limits:\n  %s:ALIPAY: [{limit: 100, calendar: day}]\n", biz),
		Env:    map[string]string{"PAYSERVER_REDIS_ADDR": testutil.RedisAddr(t), "PAYSERVER_REDIS_MODE": "standalone"},
	})
	var body string
	waitFor(t, "the redis detail of /readyz", 10*time.Second, func() bool {
		r := s.do(t, "GET", "/readyz", nil, nil)
		body = string(r.Body)
		return r.Status == 200 && strings.Contains(body, "a Redis restart forgets the calendar caps")
	})
	if !strings.Contains(body, `appendonly no, save \"\"`) {
		t.Errorf("/readyz does not show the settings: %s", body)
	}
	if n := strings.Count(s.logs(), "a Redis restart forgets the calendar caps"); n != 1 {
		t.Errorf("%d log lines warn of it, want 1", n)
	}
	if m := string(s.do(t, "GET", "/metrics", nil, nil).Body); !strings.Contains(m, "\npayserver_redis_persistence 0\n") {
		t.Errorf("/metrics lacks payserver_redis_persistence 0")
	}
}
