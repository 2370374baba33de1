//go:build unix && !linux

package testenv

import "syscall"

// sysProcAttr puts the server in a process group of its own, so that a
// signal reaches anything it forks.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
