package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is one server process that can be started again with the same
// command line: its output goes to log, appended across starts.
type proc struct {
	name string
	args []string // args[0] is the binary
	env  []string // added to the environment
	dir  string   // working directory
	log  string
	// more, when set, adds arguments at each start (a Sentinel data node
	// comes back as a replica of the master of the moment).
	more func() []string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

// start launches the process in a process group of its own (on Linux it
// also gets SIGKILL when the thread that started it dies).
func (p *proc) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		select {
		case <-p.done:
		default:
			return fmt.Errorf("%s is running", p.name)
		}
	}
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer f.Close() // the child has its own descriptor
	args := p.args[:len(p.args):len(p.args)]
	if p.more != nil {
		args = append(args, p.more()...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = p.dir
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	p.cmd, p.done = cmd, done
	return nil
}

// running reports whether the process has been started and not exited.
func (p *proc) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// pid returns the process id of the last start (0 before the first).
func (p *proc) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// signal sends sig to the process group.
func (p *proc) signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return errors.New(p.name + " was never started")
	}
	select {
	case <-p.done:
		return errors.New(p.name + " is not running")
	default:
	}
	return syscall.Kill(-p.cmd.Process.Pid, sig)
}

// stop sends sig to the process group, and SIGKILL if it has not exited
// after grace; it returns once the process has exited. A process that is
// not running is left as it is.
func (p *proc) stop(sig syscall.Signal, grace time.Duration) {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-done:
		return // gone: its pid may belong to someone else by now
	default:
	}
	pg := -cmd.Process.Pid
	_ = syscall.Kill(pg, syscall.SIGCONT) // a paused process cannot act on SIGTERM
	_ = syscall.Kill(pg, sig)
	select {
	case <-done:
	case <-time.After(grace):
		_ = syscall.Kill(pg, syscall.SIGKILL)
		<-done
	}
	_ = syscall.Kill(pg, syscall.SIGKILL) // anything the server forked
}

// exited returns a channel closed when the last started process exits.
func (p *proc) exited() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

// tail returns the last n lines of the process's log.
func (p *proc) tail(n int) string {
	b, err := os.ReadFile(p.log)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// hopeless marks a probe error after which waiting is pointless.
type hopeless struct{ error }

// waitReady polls ready every 50 ms until it returns nil or a hopeless
// error, the process exits or timeout passes.
func (p *proc) waitReady(timeout time.Duration, ready func() error) error {
	deadline := time.Now().Add(timeout)
	exited := p.exited()
	for {
		err := ready()
		if err == nil {
			return nil
		}
		if errors.As(err, new(hopeless)) {
			return err
		}
		select {
		case <-exited:
			return fmt.Errorf("%s exited during start-up (last probe: %v)", p.name, err)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %v: %w", p.name, timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// fail fails tb with msg and the end of the process's log.
func (p *proc) fail(tb TB, err error) {
	tb.Helper()
	tb.Fatalf("testenv: %v\n---- last lines of %s ----\n%s", err, p.log, p.tail(30))
}
