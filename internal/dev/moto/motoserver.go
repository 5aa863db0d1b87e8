// Package motoserver starts and stops a moto server, the AWS emulator the
// integration tests and the local stack run against.
package moto

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Region is the region every emulated resource lives in.
const Region = "us-east-1"

// Server is a running moto server.
type Server struct {
	// Endpoint is the server's base URL, e.g. http://127.0.0.1:5000.
	Endpoint string
	cmd      *exec.Cmd
	exited   chan error // receives cmd.Wait's result once
	once     sync.Once
}

// Binary finds moto_server: $RUNSTWICE_MOTO, the checkout's .venv, or PATH.
func Binary() (string, error) {
	if p := os.Getenv("RUNSTWICE_MOTO"); p != "" {
		return p, nil
	}
	if root, err := RepoRoot(); err == nil {
		p := filepath.Join(root, ".venv", "bin", "moto_server")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	p, err := exec.LookPath("moto_server")
	if err != nil {
		return "", errors.New("moto_server not found in .venv/bin or on PATH (run `make venv`)")
	}
	return p, nil
}

// RepoRoot returns the directory holding go.mod, walking up from the working
// directory.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod not found")
		}
		dir = parent
	}
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

// StartFree starts moto on a free loopback port, trying again when another
// process takes the port first.
func StartFree(bin string, logs io.Writer) (*Server, error) {
	var lastErr error
	for range 3 {
		port, err := FreePort()
		if err != nil {
			return nil, err
		}
		s, err := Start(bin, port, logs)
		if err == nil {
			return s, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

// Start starts moto on 127.0.0.1:port and waits until it answers. Its output
// goes to logs (discarded when nil). The server dies with this process.
func Start(bin string, port int, logs io.Writer) (*Server, error) {
	var captured bytes.Buffer
	out := io.Writer(&captured)
	if logs != nil {
		out = io.MultiWriter(&captured, logs)
	}
	cmd := exec.Command(bin, "-H", "127.0.0.1", "-p", strconv.Itoa(port))
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_DEFAULT_REGION="+Region)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("motoserver: start %s: %w", bin, err)
	}
	s := &Server{Endpoint: fmt.Sprintf("http://127.0.0.1:%d", port), cmd: cmd, exited: make(chan error, 1)}
	go func() { s.exited <- cmd.Wait() }()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.Endpoint+"/moto-api/", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode < 500 {
				return s, nil
			}
		}
		select {
		case err := <-s.exited:
			return nil, fmt.Errorf("motoserver: exited on port %d: %v: %s", port, err, tail(captured.Bytes()))
		case <-ctx.Done():
			s.Stop()
			return nil, fmt.Errorf("motoserver: not ready after 60s on port %d", port)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Stop ends the server and waits for it. It is safe to call more than once.
func (s *Server) Stop() {
	s.once.Do(func() {
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-s.exited:
		case <-time.After(3 * time.Second):
			_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
			<-s.exited
		}
	})
}

func tail(b []byte) []byte {
	if len(b) > 2000 {
		return b[len(b)-2000:]
	}
	return b
}
