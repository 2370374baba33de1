package integration

import (
	"fmt"
	"strconv"
	"syscall"
	"testing"
	"time"

	"payserver/internal/testutil"
)

// nacosHeartbeatTimeout is Nacos's instance heartbeat timeout (15 s, the
// default of preserved.heart.beat.timeout): the longest a dead ephemeral
// instance stays in the healthy list.
const nacosHeartbeatTimeout = 15 * time.Second

// TestNacosLiveShare: three payserver instances read their limits from the
// same Nacos dataId and register in Nacos naming. Each enforces 1/3 of
// every limit when it has to decide locally. One is SIGKILLed (no
// deregistration: the server must notice on its own); the survivors' local
// share moves to 1/2 within the Nacos heartbeat timeout, while
// PAYSERVER_INSTANCE_COUNT stays at its floor of 1.
func TestNacosLiveShare(t *testing.T) {
	nacos := testutil.Env(t, "PAYSERVER_TEST_NACOS_ADDR")
	dataID := testutil.UniqueName("live-share")
	biz := testutil.UniqueName("LS")
	nacosPublish(t, nacos, dataID, fmt.Sprintf("window: 1m\nlimits:\n  %s:ALIPAY: 90\n", biz))
	t.Cleanup(func() { nacosDelete(t, nacos, dataID) })
	dsn := testutil.MustFreshMySQL(t)
	var servers []*server
	for i := 0; i < 3; i++ {
		servers = append(servers, startServer(t, serverOptions{DSN: dsn, Env: map[string]string{
			"PAYSERVER_NACOS_ADDR": nacos, "PAYSERVER_NACOS_DATA_ID": dataID, "PAYSERVER_INSTANCE_COUNT": "1",
		}}))
	}
	share := func(s *server) float64 { return s.metric(t, "payserver_limiter_local_share") }
	waitFor(t, "every instance at share 1/3", 20*time.Second, func() bool {
		for _, s := range servers {
			if share(s) != 1.0/3 {
				return false
			}
		}
		return true
	})
	for i, s := range servers {
		if got := s.metric(t, "payserver_nacos_live_instances"); got != 3 {
			t.Errorf("instance %d sees %v live instances, want 3", i, got)
		}
	}

	killed := servers[2]
	if err := killed.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-killed.done
	start := time.Now()
	survivors := servers[:2]
	waitFor(t, "survivors at share 1/2 within the heartbeat timeout", nacosHeartbeatTimeout, func() bool {
		for _, s := range survivors {
			if share(s) != 0.5 {
				return false
			}
		}
		return true
	})
	took := time.Since(start)
	for i, s := range survivors {
		if got := s.metric(t, "payserver_nacos_live_instances"); got != 2 {
			t.Errorf("survivor %d sees %v live instances, want 2", i, got)
		}
	}
	t.Logf("LIVE SHARE 3->2 instances (SIGKILL): survivors at 1/2 after %v (limit: %v)", took.Round(time.Millisecond), nacosHeartbeatTimeout)

	// The floor: an instance told PAYSERVER_INSTANCE_COUNT=4 never goes above 1/4.
	floor := startServer(t, serverOptions{DSN: dsn, Env: map[string]string{
		"PAYSERVER_NACOS_ADDR": nacos, "PAYSERVER_NACOS_DATA_ID": dataID, "PAYSERVER_INSTANCE_COUNT": "4",
	}})
	waitFor(t, "three live instances seen by all", 20*time.Second, func() bool {
		return floor.metric(t, "payserver_nacos_live_instances") == 3 && share(survivors[0]) == 1.0/3
	})
	if got := share(floor); got != 0.25 {
		t.Errorf("instance with PAYSERVER_INSTANCE_COUNT=4 and 3 live: share %s, want 0.25 (the floor)", strconv.FormatFloat(got, 'g', -1, 64))
	}
}
