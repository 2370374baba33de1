package integration

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestTwoEmbeddedInstancesOnOneDataDir starts two payserver binaries on one
// data dir: the second exits at once with a clear message instead of
// running its own in-process Redis (which doubled every limit).
func TestTwoEmbeddedInstancesOnOneDataDir(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "shared")
	first := startServer(t, serverOptions{Embedded: true, Env: map[string]string{"PAYSERVER_DATA_DIR": dataDir}})
	if !strings.Contains(first.logs(), "single-instance") {
		t.Errorf("the start log does not say embedded mode is single-instance:\n%s", first.logs())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
		"PAYSERVER_HTTP_ADDR=" + freePort(t), "PAYSERVER_DATA_DIR=" + dataDir,
		"PAYSERVER_LIMITS_FILE=" + first.env["PAYSERVER_LIMITS_FILE"], "PAYSERVER_CONFIG=" + first.env["PAYSERVER_CONFIG"]}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if ctx.Err() != nil || !errors.As(err, &exit) || exit.ExitCode() == 0 {
		t.Fatalf("the second instance did not exit with an error (err %v):\n%s", err, out)
	}
	if !strings.Contains(string(out), "locked by another payserver process") || !strings.Contains(string(out), "single-instance") {
		t.Errorf("the second instance's message does not say why:\n%s", out)
	}
	if r := first.do(t, "GET", "/healthz", nil, nil); r.Status != 200 {
		t.Errorf("the first instance stopped answering: %d", r.Status)
	}
}
