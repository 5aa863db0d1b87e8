//go:build integration

package moto

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// TestStartNeverTakesAnotherServerForMoto: another HTTP server on the port
// (on macOS, AirPlay holds 5000) makes Start fail with ErrPortInUse; it is
// never mistaken for moto.
func TestStartNeverTakesAnotherServerForMoto(t *testing.T) {
	bin, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	var hits atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusForbidden) // AirPlay's answer
	}))
	defer other.Close()
	port := other.Listener.Addr().(*net.TCPAddr).Port
	s, err := Start(bin, port, nil)
	if err == nil {
		s.Stop()
		t.Fatal("Start succeeded on a port another server holds")
	}
	if !errors.Is(err, ErrPortInUse) {
		t.Fatalf("Start = %v; want ErrPortInUse", err)
	}
	t.Logf("Start: %v (the other server was asked %d times)", err, hits.Load())
}

func TestStartAndStop(t *testing.T) {
	s := startMoto(t)
	resp, err := http.Get(s.Endpoint + "/moto-api/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	s.Stop()
	s.Stop()
	if _, err := http.Get(s.Endpoint + "/moto-api/"); err == nil {
		t.Fatal("moto still answers after Stop")
	}
}
