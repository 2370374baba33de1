//go:build linux

package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestMakeRunStopsCleanlyOnCtrlC: at a terminal, Ctrl-C on `make run`
// stops payserver, which exits 0, and make exits 0 with it: the terminal's
// SIGINT goes to payserver alone, not to make, which would otherwise die
// of it (130) whatever payserver did.
func TestMakeRunStopsCleanlyOnCtrlC(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs payserver through make")
	}
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	master, slave := openPTY(t)
	cmd := exec.Command("make", "--no-print-directory", "run")
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "PAYSERVER_HTTP_ADDR=127.0.0.1:0", "PAYSERVER_DATA_DIR="+filepath.Join(t.TempDir(), "data"))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var out bytes.Buffer
	read := make(chan []byte)
	go func() {
		for {
			b := make([]byte, 4096)
			n, err := master.Read(b)
			if err != nil {
				close(read)
				return
			}
			read <- b[:n]
		}
	}()
	deadline := time.After(3 * time.Minute) // make builds bin/payserver first
	for !bytes.Contains(out.Bytes(), []byte("payserver listening")) {
		select {
		case b := <-read:
			out.Write(b)
		case err := <-done:
			t.Fatalf("make run ended before payserver listened: %v\n%s", err, out.Bytes())
		case <-deadline:
			_ = cmd.Process.Kill()
			t.Fatalf("payserver did not start:\n%s", out.Bytes())
		}
	}
	if _, err := master.Write([]byte{3}); err != nil { // Ctrl-C
		t.Fatal(err)
	}
	for {
		select {
		case b, ok := <-read:
			if ok {
				out.Write(b)
			} else {
				read = nil
			}
		case err := <-done:
			// What payserver wrote last may still be on its way.
			for drain := time.After(2 * time.Second); read != nil; {
				select {
				case b, ok := <-read:
					if !ok {
						read = nil
					}
					out.Write(b)
				case <-drain:
					read = nil
				}
			}
			if err != nil || !bytes.Contains(out.Bytes(), []byte("payserver stopped")) {
				t.Fatalf("make run after Ctrl-C: %v, want exit 0 after payserver stopped\n%s", err, out.Bytes())
			}
			return
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			t.Fatalf("make run did not end within 30 s of Ctrl-C:\n%s", out.Bytes())
		}
	}
}

// openPTY opens a pseudo-terminal: its master, and its slave for a child.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	return m, s
}
