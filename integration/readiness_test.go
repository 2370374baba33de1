package integration

import (
	"strings"
	"testing"
)

// TestReadyzRedisUnreachable: with Redis unreachable from the start, policy
// local keeps the instance ready (Redis degraded, decisions in process) and
// serving; policy deny takes it out of traffic, naming redis.
func TestReadyzRedisUnreachable(t *testing.T) {
	for _, tt := range []struct {
		policy     string
		wantStatus int
		wantRedis  string
	}{
		{"local", 200, "degraded (deciding in process)"},
		{"deny", 503, "connect"},
	} {
		t.Run(tt.policy, func(t *testing.T) {
			s := startServer(t, serverOptions{Env: map[string]string{
				"PAYSERVER_REDIS_ADDR": freePort(t), "PAYSERVER_LIMITER_POLICY": tt.policy,
			}})
			r := s.do(t, "GET", "/readyz", nil, nil)
			body := r.JSON(t)
			checks, _ := body["checks"].(map[string]any)
			if redis, _ := checks["redis"].(string); r.Status != tt.wantStatus || !strings.Contains(redis, tt.wantRedis) {
				t.Fatalf("/readyz with Redis unreachable under %s: %d %s, want %d with checks.redis containing %q",
					tt.policy, r.Status, r.Body, tt.wantStatus, tt.wantRedis)
			}
			missing, _ := body["missing"].([]any)
			if named := len(missing) == 1 && missing[0] == "redis"; named != (tt.wantStatus == 503) {
				t.Errorf("missing %v under %s", missing, tt.policy)
			}
			if tt.policy == "local" {
				if r := s.pay(t, payBody("redis-unreachable", "ONLINE_PAY", "ALIPAY")); r.Status != 200 {
					t.Errorf("pay under local with Redis unreachable: %d %s, want 200", r.Status, r.Body)
				}
			}
		})
	}
}
