package integration

import (
	"fmt"
	"io"
	"net"
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"payserver/internal/testenv"
	"payserver/internal/testutil"
)

// slowProxy forwards TCP to upstream, holding every chunk from the client
// for delay first: a Redis that answers late.
type slowProxy struct {
	addr  string
	delay atomic.Int64 // ns
	ln    net.Listener
}

func startSlowProxy(t *testing.T, upstream string) *slowProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &slowProxy{addr: ln.Addr().String(), ln: ln}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", upstream)
			if err != nil {
				c.Close()
				continue
			}
			wg.Add(2)
			go func() { // client -> upstream, late
				defer wg.Done()
				defer u.Close()
				buf := make([]byte, 32<<10)
				for {
					n, err := c.Read(buf)
					if n > 0 {
						time.Sleep(time.Duration(p.delay.Load()))
						if _, werr := u.Write(buf[:n]); werr != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}()
			go func() { // upstream -> client
				defer wg.Done()
				defer c.Close()
				_, _ = io.Copy(c, u)
			}()
		}
	}()
	return p
}

// TestRedisRefusingConnectionsUnderLightTraffic: Redis killed, about two
// payments a second under policy local: every one is decided in process
// and admitted (its windows have room), none is 429 (a refusal only ever
// means the window is full) or 503. Before, go-redis's dial retries
// outlasted the check's deadline, every payment was an unknown outcome and
// a probe, and answered 429 with used 0.
func TestRedisRefusingConnectionsUnderLightTraffic(t *testing.T) {
	r := testenv.StartRedis(t, testenv.RedisOptions{})
	biz := testutil.UniqueName("LIGHT")
	s := startServer(t, serverOptions{
		Limits: fmt.Sprintf("limits:\n  %s:ALIPAY: [{limit: 2, window: 1s}, {limit: 50, calendar: day}]\n", biz),
		Env:    map[string]string{"PAYSERVER_REDIS_ADDR": r.Addr, "PAYSERVER_INSTANCE_COUNT": "1"},
	})
	waitLimitsLoaded(t, s)
	r.Kill()
	var lat []time.Duration
	for i := range 6 {
		start := time.Now()
		got := s.pay(t, payBody(fmt.Sprintf("light-%d", i), biz, "ALIPAY"))
		lat = append(lat, time.Since(start))
		if got.Status != 200 {
			t.Errorf("payment %d with Redis down: %d %s, want 200 (decided in process, its window has room)", i, got.Status, got.Body)
		}
		time.Sleep(600 * time.Millisecond) // past the breaker's cool-down: each is a probe; at most 2 in any second
	}
	t.Logf("latencies with Redis refusing connections: %v", lat)
}

// TestSlowRedisLeavesNoSlotBehind: Redis answering later than the
// limiter's deadline (a proxy holding each request 1.5 s): the payments are
// answered 503 (their outcome unknown), never 429, and their late scripts
// record them after all. Not retried, they are closed FAILED NOT_SENT once
// the grace passes and Redis answers again, and their slots released: a
// healthy instance then admits the day's whole cap. Before, they stayed in
// the day window until midnight and a 3/day cap admitted nothing more. The
// grace (4 s here) must outlast the longest a sent call can take to reach
// Redis (1.5 s here): a call that arrives after the release records its
// member again.
func TestSlowRedisLeavesNoSlotBehind(t *testing.T) {
	r := testenv.StartRedis(t, testenv.RedisOptions{})
	p := startSlowProxy(t, r.Addr)
	biz := testutil.UniqueName("SLOW")
	s := startServer(t, serverOptions{
		Limits: fmt.Sprintf("limits:\n  %s:ALIPAY: [{limit: 3, calendar: day}]\n", biz),
		Env: map[string]string{"PAYSERVER_REDIS_ADDR": p.addr, "PAYSERVER_INSTANCE_COUNT": "1",
			"PAYSERVER_LOST_ANSWER_GRACE": "4s"},
	})
	waitLimitsLoaded(t, s)
	p.delay.Store(int64(1500 * time.Millisecond))
	for i := range 3 {
		got := s.pay(t, payBody(fmt.Sprintf("slow-%d", i), biz, "ALIPAY"))
		if got.Status == 429 {
			t.Errorf("payment %d with Redis slow: 429 %s; a refusal must mean a full window", i, got.Body)
		}
		t.Logf("payment %d with Redis slow: %d %s", i, got.Status, got.JSON(t)["code"])
	}
	p.delay.Store(0)
	// The late scripts ran; once the grace passed and Redis answers in
	// time, the unanswered payments are closed and their slots freed.
	waitFor(t, "the unanswered payments to be closed", 30*time.Second, func() bool {
		for i := range 3 {
			o := s.do(t, "GET", fmt.Sprintf("/pay/slow-%d", i), nil, nil)
			if o.Status == 404 {
				return false
			}
		}
		return true
	})
	waitFor(t, "a healthy instance to admit the day's cap", 30*time.Second, func() bool {
		return s.pay(t, payBody("after-0", biz, "ALIPAY")).Status == 200
	})
	for i := 1; i < 3; i++ {
		if got := s.pay(t, payBody(fmt.Sprintf("after-%d", i), biz, "ALIPAY")); got.Status != 200 {
			t.Errorf("payment after-%d once Redis is healthy: %d %s, want 200: the day's cap of 3 is free", i, got.Status, got.Body)
		}
	}
	if t.Failed() {
		out, _ := exec.Command("sh", "-c", "redis-cli -h 127.0.0.1 -p "+port(r.Addr)+" --scan | while read k; do echo $k; redis-cli -h 127.0.0.1 -p "+port(r.Addr)+" hgetall $k 2>/dev/null; done").CombinedOutput()
		t.Logf("redis:\n%s\n%s", out, s.logs())
	}
	if got := s.pay(t, payBody("after-3", biz, "ALIPAY")); got.Status != 429 {
		t.Errorf("a 4th payment: %d, want 429", got.Status)
	}
}

func port(addr string) string { _, p, _ := net.SplitHostPort(addr); return p }
