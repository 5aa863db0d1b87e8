// Package moto starts and stops a moto server, the AWS emulator the
// integration tests and the local stack run against.
package moto

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/runstwice/runstwice/internal/dev/proc"
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
	venv := ""
	if root, err := RepoRoot(); err == nil {
		venv = filepath.Join(root, ".venv", "bin", "moto_server")
	}
	p, ok := proc.Find("moto_server", venv)
	if !ok {
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
func FreePort() (int, error) { return proc.FreePort() }

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
//
// It is ready only when this very process says it listens on the port and
// the port answers: a port some other server holds is never taken for moto
// (moto exits, and Start says the port is in use).
func Start(bin string, port int, logs io.Writer) (*Server, error) {
	captured := &startWatch{listening: fmt.Sprintf("Running on http://127.0.0.1:%d", port), ready: make(chan struct{})}
	out := io.Writer(captured)
	if logs != nil {
		out = io.MultiWriter(captured, logs)
	}
	cmd := exec.Command(bin, "-H", "127.0.0.1", "-p", strconv.Itoa(port))
	if python := scriptPython(bin); python != "" {
		cmd = exec.Command(python, "-c", launchFromStdin, "-H", "127.0.0.1", "-p", strconv.Itoa(port))
		cmd.Stdin = strings.NewReader(launcher)
	}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_DEFAULT_REGION="+Region)
	cmd.SysProcAttr = proc.Group()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("motoserver: start %s: %w", bin, err)
	}
	s := &Server{Endpoint: fmt.Sprintf("http://127.0.0.1:%d", port), cmd: cmd, exited: make(chan error, 1)}
	go func() { s.exited <- cmd.Wait() }()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	listening := captured.ready
	for {
		select {
		case err := <-s.exited:
			s.exited <- err
			if bytes.Contains(captured.tail(), []byte("in use")) {
				return nil, fmt.Errorf("motoserver: 127.0.0.1:%d is in use by another program: %w", port, ErrPortInUse)
			}
			return nil, fmt.Errorf("motoserver: exited on port %d: %v: %s", port, err, captured.tail())
		case <-ctx.Done():
			s.Stop()
			return nil, fmt.Errorf("motoserver: not ready after 60s on port %d", port)
		case <-listening:
			listening = nil // ours holds the port: wait for it to answer
		case <-time.After(100 * time.Millisecond):
		}
		if listening != nil {
			continue
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.Endpoint+"/moto-api/", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode < 500 {
				return s, nil
			}
		}
	}
}

// launcher starts moto_server with the changes launch.py lists at its top
// (among them: DynamoDB transactions that back up only the items they
// touch, kept-alive connections, a cycle collector that never rescans what
// moto holds).
//
//go:embed launch.py
var launcher string

// launchFromStdin runs the launcher, which moto's command line reads from
// standard input (so process listings show a short command).
const launchFromStdin = "import sys; exec(compile(sys.stdin.read(), 'runstwice-moto-launch.py', 'exec'))"

// scriptPython returns the interpreter of the moto_server entry-point
// script bin (its #! line), or "" when bin is not such a script (then it
// runs as it is, without the launcher).
func scriptPython(bin string) string {
	f, err := os.Open(bin)
	if err != nil {
		return ""
	}
	defer f.Close()
	head := make([]byte, 256)
	n, _ := io.ReadFull(f, head)
	line, _, _ := bytes.Cut(head[:n], []byte("\n"))
	python, ok := bytes.CutPrefix(bytes.TrimSpace(line), []byte("#!"))
	if !ok || !bytes.Contains(python, []byte("python")) || bytes.ContainsAny(python, " \t") {
		return ""
	}
	return string(python)
}

// ErrPortInUse is the cause when moto cannot listen on its port.
var ErrPortInUse = errors.New("port in use")

// startWatch keeps the last 2 KB moto wrote and closes ready when moto says
// it listens.
type startWatch struct {
	listening string
	ready     chan struct{}
	mu        sync.Mutex
	buf       []byte
	seen      bool
}

func (w *startWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	if !w.seen && bytes.Contains(w.buf, []byte(w.listening)) {
		w.seen = true
		close(w.ready)
	}
	if len(w.buf) > 4096 {
		w.buf = append(w.buf[:0], w.buf[len(w.buf)-2048:]...)
	}
	return len(p), nil
}

func (w *startWatch) tail() []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return bytes.Clone(w.buf)
}

// Stop ends the server and waits for it. It is safe to call more than once.
func (s *Server) Stop() {
	s.once.Do(func() { proc.Stop(s.cmd.Process.Pid, s.exited) })
}
