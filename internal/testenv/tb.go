package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
)

// TB is what the Start functions need from their caller. testing.TB
// satisfies it, and so does Session.
type TB interface {
	Helper()
	TempDir() string
	Cleanup(func())
	Logf(format string, args ...any)
	Fatalf(format string, args ...any)
	Skipf(format string, args ...any)
}

// ci reports whether missing servers are failures (CI=true).
func ci() bool { return os.Getenv("CI") == "true" }

// Binary returns the path of the named server binary (rnacos is also
// looked for in ~/.cargo/bin), or skips tb (fails it under CI=true).
func Binary(tb TB, name string) string {
	tb.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if home, err := os.UserHomeDir(); err == nil {
		p := filepath.Join(home, ".cargo", "bin", name)
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if ci() {
		tb.Fatalf("testenv: %s is not installed (scripts/install-services.sh installs it)", name)
	}
	tb.Skipf("testenv: %s is not installed; run scripts/install-services.sh or make test", name)
	return ""
}

// Installed reports whether every server binary the shared set needs is on
// PATH (or, for rnacos, in ~/.cargo/bin).
func Installed() bool {
	s := &probeTB{}
	for _, b := range []string{"redis-server", "mariadbd", "mariadb-install-db", "rnacos"} {
		if Binary(s, b); s.failed {
			return false
		}
	}
	return true
}

// probeTB records a failure or skip instead of acting on it.
type probeTB struct{ failed bool }

func (p *probeTB) Helper()                   {}
func (p *probeTB) TempDir() string           { return os.TempDir() }
func (p *probeTB) Cleanup(func())            {}
func (p *probeTB) Logf(string, ...any)       {}
func (p *probeTB) Fatalf(f string, a ...any) { p.failed = true }
func (p *probeTB) Skipf(f string, a ...any)  { p.failed = true }

// groupTB lets several goroutines start servers for one parent TB: a
// Fatalf or Skipf ends only the calling goroutine (runtime.Goexit) and is
// reported to the parent, from its own goroutine, by wait.
type groupTB struct {
	parent TB
	wg     sync.WaitGroup
	mu     sync.Mutex
	fatal  []string
	skip   []string
}

func (g *groupTB) Helper()          {}
func (g *groupTB) TempDir() string  { return g.parent.TempDir() }
func (g *groupTB) Cleanup(f func()) { g.mu.Lock(); defer g.mu.Unlock(); g.parent.Cleanup(f) }
func (g *groupTB) Logf(format string, a ...any) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.parent.Logf(format, a...)
}
func (g *groupTB) Fatalf(format string, a ...any) { g.record(&g.fatal, format, a) }
func (g *groupTB) Skipf(format string, a ...any)  { g.record(&g.skip, format, a) }

func (g *groupTB) record(to *[]string, format string, a []any) {
	g.mu.Lock()
	*to = append(*to, fmt.Sprintf(format, a...))
	g.mu.Unlock()
	runtime.Goexit()
}

// goStart runs f on a goroutine of its own.
func (g *groupTB) goStart(f func(TB)) {
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		f(g)
	}()
}

// wait waits for every goroutine and then fails (or skips) the parent with
// what they reported.
func (g *groupTB) wait() {
	g.parent.Helper()
	g.wg.Wait()
	if len(g.fatal) > 0 {
		g.parent.Fatalf("%s", strings.Join(g.fatal, "\n"))
	}
	if len(g.skip) > 0 {
		g.parent.Skipf("%s", strings.Join(g.skip, "\n"))
	}
}
