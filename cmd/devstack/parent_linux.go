package main

import "syscall"

// stopWithParent asks the kernel to send SIGTERM when the parent process (make,
// a test) dies, so a killed `make run` never leaves the stack running: the
// SIGTERM takes the same clean shutdown path as Ctrl-C.
func stopWithParent() {
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGTERM), 0)
}
