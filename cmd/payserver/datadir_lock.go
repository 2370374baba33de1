package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// dataDirLockName is the lock file inside the data dir.
const dataDirLockName = "payserver.lock"

// errDataDirInUse says another payserver process holds the data dir.
var errDataDirInUse = errors.New("data dir in use")

// dataDirLock is an exclusive flock(2) on DataDir/payserver.lock, held for
// the life of the process. The kernel drops it when the process dies, so a
// crash never leaves a stale lock.
type dataDirLock struct{ f *os.File }

// lockDataDir takes the lock without waiting. When another process holds
// it, the error wraps errDataDirInUse and names that process's pid.
func lockDataDir(dir string) (*dataDirLock, error) {
	path := filepath.Join(dir, dataDirLockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("data dir lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		b, _ := os.ReadFile(path)
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			holder := strings.TrimSpace(string(b))
			if holder == "" {
				holder = "unknown"
			}
			return nil, fmt.Errorf("%w: data dir %s is locked by another payserver process (pid %s); "+
				"one process per data dir (embedded mode is single-instance: two would each enforce every limit in full); "+
				"stop it or set another PAYSERVER_DATA_DIR", errDataDirInUse, dir, holder)
		}
		return nil, fmt.Errorf("data dir lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &dataDirLock{f: f}, nil
}

// release drops the lock. It is safe on a nil lock.
func (l *dataDirLock) release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close() // closing the only descriptor releases the flock
	l.f = nil
	return err
}
