package configcenter

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestFileSourceDeletedFileLog: a deleted limits file is delivered once as
// a deleted document and refused; the log names no bogus md5 such as
// "error:open …".
func TestFileSourceDeletedFileLog(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	path := filepath.Join(t.TempDir(), "limits.yaml")
	if err := os.WriteFile(path, []byte("limits:\n  A:B: 5\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	src, err := NewFileSource(path, FileOptions{PollInterval: 20 * time.Millisecond, Debounce: 5 * time.Millisecond, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := NewManager(src, &captureApplier{}, ManagerOptions{Logger: log})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	<-m.Loaded()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for m.Status().Refusals == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // several polls of the missing file
	cancel()
	<-done
	st := m.Status()
	if st.Refusals != 1 || !strings.Contains(st.LastRefusal, "deleted") {
		t.Fatalf("status %+v; want exactly one refusal of the deleted document", st)
	}
	if s := buf.String(); strings.Contains(s, "error:") || strings.Contains(s, `md5=""`) {
		t.Errorf("log names a bogus md5:\n%s", s)
	}
}
