// Package testenv starts the real emulators the integration tests run against.
// A test that needs moto calls Moto(t); the first call starts one moto server
// for the test binary on a free loopback port and TestMain stops it. When it
// cannot start, the test fails: integration tests never skip.
package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/runstwice/runstwice/internal/awsx"
)

// Region is the region every emulated resource lives in.
const Region = "us-east-1"

// Server is a running moto server.
type Server struct {
	// Endpoint is the server's base URL, e.g. http://127.0.0.1:41234.
	Endpoint string
	cmd      *exec.Cmd
	exited   chan error // receives cmd.Wait's result once
	log      *bytes.Buffer
}

var (
	once     sync.Once
	shared   *Server
	startErr error
)

// Moto returns the moto server of this test binary, starting it on first use.
// It fails t when the server cannot start.
func Moto(t testing.TB) *Server {
	t.Helper()
	once.Do(func() { shared, startErr = start() })
	if startErr != nil {
		t.Fatalf("testenv: moto server did not start (integration tests need it; run `make venv`): %v", startErr)
	}
	return shared
}

// Main runs the tests and stops the moto server, if one was started. Use it
// as `func TestMain(m *testing.M) { testenv.Main(m) }`.
func Main(m *testing.M) {
	code := m.Run()
	if shared != nil {
		shared.stop()
	}
	os.Exit(code)
}

// Config returns an SDK configuration for the server, with the given extra
// API options (such as a CallCounter's).
func (s *Server) Config(apiOptions ...func(*middlewareStack) error) aws.Config {
	cfg := awsx.Static(s.Endpoint, Region)
	cfg.APIOptions = append(cfg.APIOptions, apiOptions...)
	return cfg
}

// Reset wipes every resource in the server.
func (s *Server) Reset(t testing.TB) {
	t.Helper()
	resp, err := http.Post(s.Endpoint+"/moto-api/reset", "application/json", nil)
	if err != nil {
		t.Fatalf("moto reset: %v", err)
	}
	resp.Body.Close()
}

func (s *Server) stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-s.exited:
		case <-time.After(3 * time.Second):
			_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
			<-s.exited
		}
	}
}

// MotoBinary finds moto_server: $RUNSTWICE_MOTO, the checkout's .venv, or PATH.
func MotoBinary() (string, error) {
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
		return "", errors.New("moto_server not found in .venv/bin or on PATH")
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

func start() (*Server, error) {
	bin, err := MotoBinary()
	if err != nil {
		return nil, err
	}
	var lastErr error
	for range 3 { // a port taken between FreePort and bind: try another
		port, err := FreePort()
		if err != nil {
			return nil, err
		}
		s, err := startOn(bin, port)
		if err == nil {
			return s, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func startOn(bin string, port int) (*Server, error) {
	logBuf := &bytes.Buffer{}
	cmd := exec.Command(bin, "-H", "127.0.0.1", "-p", strconv.Itoa(port))
	cmd.Stdout, cmd.Stderr = logBuf, logBuf
	cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_DEFAULT_REGION="+Region)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	exited := make(chan error, 1)
	s := &Server{Endpoint: fmt.Sprintf("http://127.0.0.1:%d", port), exited: exited, log: logBuf}
	go func() { exited <- cmd.Wait() }()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.Endpoint+"/moto-api/", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode < 500 {
				s.cmd = cmd
				return s, nil
			}
		}
		select {
		case err := <-exited:
			return nil, fmt.Errorf("moto_server exited: %v: %s", err, logBuf.String())
		case <-ctx.Done():
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			return nil, fmt.Errorf("moto_server not ready after 60s: %s", logBuf.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
