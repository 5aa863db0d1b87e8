// Package testenv starts the real emulators the integration tests run against.
// A test that needs moto calls Moto(t); the first call starts one moto server
// for the test binary on a free loopback port, and the server dies with the
// test binary (the kernel kills it when its parent exits, however the
// binary ends), so a test package needs no TestMain. When it cannot start,
// the test fails: integration tests never skip.
package testenv

import (
	"net/http"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/runstwice/runstwice/internal/dev/moto"
)

// Region is the region every emulated resource lives in.
const Region = moto.Region

// Server is the moto server of a test binary.
type Server struct {
	*moto.Server
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

// Config returns an SDK configuration for the server, with the given extra
// API options (such as a CallCounter's).
func (s *Server) Config(apiOptions ...func(*middlewareStack) error) aws.Config {
	cfg := moto.Config(s.Endpoint, Region)
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

// MotoBinary finds moto_server: $RUNSTWICE_MOTO, the checkout's .venv, or PATH.
func MotoBinary() (string, error) { return moto.Binary() }

// RepoRoot returns the directory holding go.mod.
func RepoRoot() (string, error) { return moto.RepoRoot() }

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort() (int, error) { return moto.FreePort() }

func start() (*Server, error) {
	bin, err := moto.Binary()
	if err != nil {
		return nil, err
	}
	s, err := moto.StartFree(bin, nil)
	if err != nil {
		return nil, err
	}
	return &Server{s}, nil
}
