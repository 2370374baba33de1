package configcenter

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"payserver/internal/testutil"
)

// shareRecorder is a ShareSetter that keeps what it was given.
type shareRecorder struct {
	mu     sync.Mutex
	shares []float64
}

func (r *shareRecorder) SetLocalShare(s float64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.shares = append(r.shares, s)
	return nil
}

func (r *shareRecorder) last() float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.shares) == 0 {
		return 0
	}
	return r.shares[len(r.shares)-1]
}

func namingTestOptions(t testing.TB, addr, service string, port uint64, share ShareSetter) NamingOptions {
	dir := t.TempDir()
	log, level := nacosTestLogger()
	return NamingOptions{
		Addrs: []string{addr}, Group: nacosTestGroup, Service: service,
		CacheDir: filepath.Join(dir, "cache"), LogDir: filepath.Join(dir, "log"),
		Logger: log, LogLevel: level,
		IP: "127.0.0.1", Port: port, Floor: 1, Share: share, Poll: 200 * time.Millisecond,
	}
}

// TestMembershipShareFollowsLiveCount: the share is 1/max(live, Floor),
// an unknown count (0) keeps the last N, and unchanged N is not re-set.
func TestMembershipShareFollowsLiveCount(t *testing.T) {
	tests := []struct {
		name       string
		floor      int
		live       []int
		wantN      int
		wantShares []float64 // SetLocalShare calls after construction
	}{
		{"scale 3 to 2", 1, []int{3, 2}, 2, []float64{1.0 / 3, 1.0 / 2}},
		{"floor wins", 3, []int{1, 2, 3}, 3, nil},
		{"above floor", 2, []int{1, 4}, 4, []float64{1.0 / 4}},
		{"unknown keeps last", 1, []int{3, 0, 0}, 3, []float64{1.0 / 3}},
		{"same count once", 1, []int{2, 2, 2}, 2, []float64{1.0 / 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &shareRecorder{}
			opts := namingTestOptions(t, "127.0.0.1:18848", "svc", 8080, rec)
			opts.Floor = tt.floor
			var lives []int
			opts.Live = func(n int) { lives = append(lives, n) }
			m, err := NewMembership(opts)
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range tt.live {
				m.observe(n)
			}
			if got := m.Count(); got != tt.wantN {
				t.Errorf("Count() = %d, want %d", got, tt.wantN)
			}
			if len(rec.shares) != len(tt.wantShares) {
				t.Fatalf("SetLocalShare calls = %v, want %v", rec.shares, tt.wantShares)
			}
			for i := range rec.shares {
				if rec.shares[i] != tt.wantShares[i] {
					t.Fatalf("SetLocalShare calls = %v, want %v", rec.shares, tt.wantShares)
				}
			}
			for _, n := range lives {
				if n <= 0 {
					t.Errorf("Live hook told %d; unknown counts must not be reported", n)
				}
			}
		})
	}
}

func TestNamingOptionsValidation(t *testing.T) {
	rec := &shareRecorder{}
	tests := []struct {
		name   string
		mutate func(*NamingOptions)
	}{
		{"no address", func(o *NamingOptions) { o.Addrs = nil }},
		{"no share setter", func(o *NamingOptions) { o.Share = nil }},
		{"no service", func(o *NamingOptions) { o.Service = "" }},
		{"bad service", func(o *NamingOptions) { o.Service = "a b" }},
		{"bad ip", func(o *NamingOptions) { o.IP = "localhost" }},
		{"no port", func(o *NamingOptions) { o.Port = 0 }},
		{"password without user", func(o *NamingOptions) { o.Password = "x" }},
		{"no cache dir", func(o *NamingOptions) { o.CacheDir = "" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := namingTestOptions(t, "127.0.0.1:18848", "svc", 8080, rec)
			tt.mutate(&opts)
			if _, err := NewMembership(opts); err == nil {
				t.Fatalf("NewMembership accepted %s", tt.name)
			}
		})
	}
}

// TestMembershipRealNacos: three members of one service on the real
// r-nacos; when one stops, the survivors' shares move from 1/3 to 1/2
// within 15 s (the Nacos instance heartbeat timeout).
func TestMembershipRealNacos(t *testing.T) {
	addr := nacosTestAddr(t)
	service := testutil.UniqueName("naming")
	type member struct {
		rec    *shareRecorder
		cancel context.CancelFunc
		done   chan struct{}
	}
	var members []member
	for i := 0; i < 3; i++ {
		rec := &shareRecorder{}
		m, err := NewMembership(namingTestOptions(t, addr, service, uint64(20000+i), rec))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := m.Run(ctx); err != nil {
				t.Errorf("Run: %v", err)
			}
		}()
		members = append(members, member{rec, cancel, done})
	}
	t.Cleanup(func() {
		for _, m := range members {
			m.cancel()
			<-m.done
		}
	})
	waitShares := func(what string, ms []member, want float64, timeout time.Duration) time.Duration {
		t.Helper()
		start := time.Now()
		for time.Since(start) < timeout {
			ok := true
			for _, m := range ms {
				if m.rec.last() != want {
					ok = false
				}
			}
			if ok {
				return time.Since(start)
			}
			time.Sleep(50 * time.Millisecond)
		}
		var got []float64
		for _, m := range ms {
			got = append(got, m.rec.last())
		}
		t.Fatalf("%s: shares %v after %v, want all %v", what, got, timeout, want)
		return 0
	}
	waitShares("three members", members, 1.0/3, 20*time.Second)
	members[2].cancel()
	<-members[2].done
	took := waitShares("after one stopped", members[:2], 1.0/2, 15*time.Second)
	t.Logf("LIVE SHARE 3->2 members: survivors at 1/2 after %v", took)
}
