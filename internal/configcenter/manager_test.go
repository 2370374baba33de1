package configcenter

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
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

// recordingHistory keeps every recorded entry.
type recordingHistory struct {
	mu      sync.Mutex
	entries []Change
}

func (h *recordingHistory) Record(_ context.Context, c Change) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.entries = append(h.entries, c)
	return nil
}

// TestManagerRecordsKinds: the first document is a load, a comment-only
// edit is recorded as unchanged (no diff), a real edit as a change with its
// diff, and a refused document is persisted with its reason.
func TestManagerRecordsKinds(t *testing.T) {
	ctx := context.Background()
	h := &recordingHistory{}
	m, _ := NewManager(chanSource{}, &captureApplier{}, ManagerOptions{History: h})
	docs := []string{
		"limits:\n  A:B: 5\n",
		"# a comment\nlimits:\n  A:B: 5\n",
		"limits:\n  A:B: 6\n",
		"limits:\n  a b: 1\n",
	}
	for _, d := range docs {
		_ = m.Apply(ctx, Document{Source: "file", Name: "f", Content: []byte(d)})
	}
	want := []struct {
		kind    ChangeKind
		keys    string
		refusal bool
	}{
		{KindLoad, "A:B: absent -> 5/1s", false},
		{KindUnchanged, "", false},
		{KindChange, "A:B: 5/1s -> 6/1s", false},
		{KindRefused, "", true},
	}
	if len(h.entries) != len(want) {
		t.Fatalf("recorded %d entries, want %d: %+v", len(h.entries), len(want), h.entries)
	}
	for i, w := range want {
		got := h.entries[i]
		if got.Kind != w.kind || strings.Join(got.Keys, "; ") != w.keys || (got.Refusal != "") != w.refusal || got.MD5 == "" {
			t.Errorf("entry %d = %+v, want kind %s, keys %q, refusal %v, an md5", i, got, w.kind, w.keys, w.refusal)
		}
	}
}

// TestManagerRefusalBeforeAnyLoad: a refusal at first start does not claim
// that last good limits stay in force, and a later good document marks the
// refusal superseded.
func TestManagerRefusalBeforeAnyLoad(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	m, _ := NewManager(chanSource{}, &captureApplier{}, ManagerOptions{Logger: log})
	_ = m.Apply(context.Background(), Document{Source: "file", Content: []byte("limits:\n  a b: 1\n")})
	if s := buf.String(); strings.Contains(s, "last good limits stay in force") || !strings.Contains(s, "no limits are in force") {
		t.Errorf("first-start refusal log = %q; want it to say no limits are in force", s)
	}
	if st := m.Status(); st.LastRefusalSuperseded || st.LastRefusalAt.IsZero() {
		t.Errorf("status after the refusal %+v", st)
	}
	_ = m.Apply(context.Background(), Document{Source: "file", Content: []byte("limits:\n  A:B: 1\n")})
	if st := m.Status(); !st.LastRefusalSuperseded || st.LastRefusal == "" {
		t.Errorf("status after a later good document %+v; want the refusal kept and marked superseded", st)
	}
}

// TestManagerRevertSupersedesRefusal: reverting a refused edit to the
// document already in force (the same md5) supersedes the refusal, logs the
// recovery and records it in history; a repeat of the same good document
// with no refusal before it records nothing.
func TestManagerRevertSupersedesRefusal(t *testing.T) {
	ctx := context.Background()
	var buf bytes.Buffer
	h := &recordingHistory{}
	m, _ := NewManager(chanSource{}, &captureApplier{}, ManagerOptions{Logger: slog.New(slog.NewTextHandler(&buf, nil)), History: h})
	good := Document{Source: "file", Name: "f", Content: []byte("limits:\n  A:B: 5\n")}
	for _, d := range []Document{good, {Source: "file", Name: "f", Content: []byte("limits:\n  a b: 1\n")}} {
		_ = m.Apply(ctx, d)
	}
	buf.Reset()
	if err := m.Apply(ctx, good); err != nil {
		t.Fatalf("reverted document refused: %v", err)
	}
	st := m.Status()
	if !st.LastRefusalSuperseded || st.LastRefusal == "" {
		t.Errorf("status after the revert: superseded %v, refusal %q; want the refusal kept and superseded", st.LastRefusalSuperseded, st.LastRefusal)
	}
	if got := buf.String(); !strings.Contains(got, "supersedes the refusal") || !strings.Contains(got, "md5="+ContentMD5(good.Content)) {
		t.Errorf("log after the revert = %q; want a line saying the document in force supersedes the refusal, with its md5", got)
	}
	if n := len(h.entries); n != 3 || h.entries[2].Kind != KindUnchanged || h.entries[2].MD5 != ContentMD5(good.Content) {
		t.Fatalf("history %+v; want load, refused, then unchanged with the md5 in force", h.entries)
	}
	if st.Applied != 1 {
		t.Errorf("applied = %d, want 1: the revert put nothing new in force", st.Applied)
	}
	buf.Reset()
	_ = m.Apply(ctx, good)
	if len(h.entries) != 3 || buf.Len() != 0 {
		t.Errorf("the same document again recorded %d entries and logged %q; want nothing new", len(h.entries), buf.String())
	}
}
