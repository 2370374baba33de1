package configcenter

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"payserver/internal/ratelimit"
)

type captureApplier struct{ cfg *ratelimit.Config }

func (c *captureApplier) SetConfig(cfg *ratelimit.Config) { c.cfg = cfg }

// chanSource delivers the documents it is given, then waits for ctx.
type chanSource struct{ docs []Document }

func (s chanSource) Describe() string { return "test" }
func (s chanSource) Run(ctx context.Context, sink func(Document)) error {
	for _, d := range s.docs {
		sink(d)
	}
	return nil
}

func rule(t *testing.T, a *captureApplier, key string) string {
	t.Helper()
	if a.cfg == nil {
		return "none"
	}
	k, _ := ratelimit.ParseKey(key)
	r, ok := a.cfg.Rules[k]
	return DescribeRule(r, ok)
}

func TestManagerKeepsLastGoodAndRefusesBad(t *testing.T) {
	ctx := context.Background()
	a := &captureApplier{}
	m, _ := NewManager(chanSource{}, a, ManagerOptions{})
	if err := m.Apply(ctx, Document{Source: "nacos", Content: []byte("limits:\n  A:B: 5\n")}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []Document{
		{Source: "nacos", Content: []byte("limits:\n  a b: 1\n")},
		{Source: "nacos", Content: []byte("")},
		{Source: "nacos", Content: []byte("   \n")},
		{Source: "nacos", Deleted: true},
	} {
		if err := m.Apply(ctx, bad); err == nil {
			t.Fatalf("accepted %q", bad.Content)
		}
		if got := rule(t, a, "A:B"); got != "5/1s" {
			t.Fatalf("rule after a bad document %q, want the last good 5/1s", got)
		}
	}
	if st := m.Status(); st.Refusals != 4 || st.LastRefusal == "" || st.Applied != 1 {
		t.Fatalf("status %+v", st)
	}
}

// TestManagerLastGoodSurvivesRestart: a restart whose source delivers only
// a refused document (as a Nacos snapshot holding a bad push would) still
// enforces the last good limits.
func TestManagerLastGoodSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "limits", "last-good.yaml")
	first := &captureApplier{}
	m1, _ := NewManager(chanSource{docs: []Document{
		{Source: "nacos", Content: []byte("limits:\n  A:B: 7\n")},
		{Source: "nacos", Content: []byte("limits:\n  nope\n")},
	}}, first, ManagerOptions{LastGoodPath: path})
	_ = m1.Run(ctx)
	second := &captureApplier{}
	m2, _ := NewManager(chanSource{docs: []Document{{Source: "nacos", Content: []byte("limits:\n  nope\n")}}}, second, ManagerOptions{LastGoodPath: path})
	_ = m2.Run(ctx)
	if got := rule(t, second, "A:B"); got != "7/1s" {
		t.Fatalf("after restart the rule is %q, want the last good 7/1s", got)
	}
	if st := m2.Status(); !st.Loaded || st.Refusals != 1 {
		t.Fatalf("status %+v", st)
	}
}

// blockingHistory blocks Record until released, like an unreachable database.
type blockingHistory struct{ release chan struct{} }

func (h blockingHistory) Record(ctx context.Context, _ Change) error {
	select {
	case <-h.release:
	case <-ctx.Done():
	}
	return ctx.Err()
}

// TestManagerHistoryDoesNotBlockStatus: while the history store hangs,
// Status (GET /limits, /readyz) still answers and the new limits are in force.
func TestManagerHistoryDoesNotBlockStatus(t *testing.T) {
	h := blockingHistory{release: make(chan struct{})}
	a := &captureApplier{}
	m, _ := NewManager(chanSource{}, a, ManagerOptions{History: h})
	done := make(chan struct{})
	go func() {
		_ = m.Apply(context.Background(), Document{Source: "nacos", Content: []byte("limits:\n  A:B: 9\n")})
		close(done)
	}()
	<-m.Loaded()
	st := make(chan Status, 1)
	go func() { st <- m.Status() }()
	select {
	case s := <-st:
		if !s.Loaded {
			t.Fatalf("status %+v", s)
		}
	case <-done:
		t.Fatal("Apply returned before the history store was released")
	case <-time.After(2 * time.Second):
		t.Fatal("Status blocked behind the history store")
	}
	close(h.release)
	<-done
}
