package testenv

import (
	"fmt"
	"os"
	"sync"
)

// Session is a TB for code that runs outside a test: a TestMain, or the
// testenv command. Its TempDirs live under one directory that Close
// removes, after running the cleanups (last registered first). Fatalf and
// Skipf print the message, Close the session and exit the process with
// status 1: a session has no test to skip, and its caller cannot go on
// without its servers.
type Session struct {
	dir string

	mu       sync.Mutex
	cleanups []func()
	closed   bool
}

// NewSession returns a session whose directories are under a new temporary
// directory named after name.
func NewSession(name string) (*Session, error) {
	dir, err := os.MkdirTemp("", name+"-")
	if err != nil {
		return nil, err
	}
	return &Session{dir: dir}, nil
}

// Helper does nothing: a session has no call stack to trim.
func (s *Session) Helper() {}

// TempDir returns a new directory under the session's directory.
func (s *Session) TempDir() string {
	d, err := os.MkdirTemp(s.dir, "")
	if err != nil {
		s.Fatalf("testenv: %v", err)
	}
	return d
}

// Cleanup registers f to run at Close.
func (s *Session) Cleanup(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cleanups = append(s.cleanups, f)
}

// Logf prints to standard error.
func (s *Session) Logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
}

// Fatalf prints, closes the session and exits with status 1.
func (s *Session) Fatalf(format string, args ...any) {
	s.Logf(format, args...)
	s.Close()
	os.Exit(1)
}

// Skipf is Fatalf: outside a test nothing can be skipped.
func (s *Session) Skipf(format string, args ...any) { s.Fatalf(format, args...) }

// Close runs the cleanups, last registered first, and removes the
// session's directory. Later calls do nothing.
func (s *Session) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	fs := s.cleanups
	s.cleanups = nil
	s.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
	_ = os.RemoveAll(s.dir)
}
