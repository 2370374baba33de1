package testenv

import "syscall"

// sysProcAttr puts the server in a process group of its own (so that a
// signal reaches anything it forks) and has the kernel SIGKILL it when the
// thread that started it dies: a test binary that crashes or is killed
// leaves no server behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
