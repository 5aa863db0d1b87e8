// Package proc is what the dev tools that run helper processes (moto,
// aws-lambda-rie) and local servers share: finding the binary, a free
// loopback port for it, a process group that dies with this process and is
// stopped as one, and a server's stop.
package proc

import (
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// StopGrace is how long Stop waits after SIGTERM before it sends SIGKILL.
const StopGrace = 3 * time.Second

// Find returns the first of paths that exists (empty ones are passed over),
// else name found on PATH; ok is false when there is neither.
func Find(name string, paths ...string) (path string, ok bool) {
	for _, p := range paths {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err == nil {
			return p, true
		}
	}
	p, err := exec.LookPath(name)
	return p, err == nil
}

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Group returns the attributes that start a command in a process group of
// its own, killed when this process dies, so that Stop ends it with every
// process it started.
func Group() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// Stop ends the process group of pid (started with Group): SIGTERM, then
// SIGKILL when exited has not delivered within StopGrace; it returns once
// exited has delivered (a value or its close).
func Stop[T any](pid int, exited <-chan T) {
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(StopGrace):
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-exited
	}
}

// Shutdown stops srv: the calls under way get grace to finish, then the
// rest are closed.
func Shutdown(srv *http.Server, grace time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if srv.Shutdown(ctx) != nil {
		_ = srv.Close()
	}
}
