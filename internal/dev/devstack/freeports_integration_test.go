//go:build integration

package devstack

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/runstwice/runstwice/internal/dev/moto"
)

// A moto port another process took between its pick and moto's listen (as
// test packages running side by side do) is not a failed start: the stack
// starts on the next free port.
func TestStartOnFreePortsTriesAnotherPortWhenOneIsTaken(t *testing.T) {
	root, err := moto.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	var picked []int
	pick := func() (int, error) {
		if len(picked) == 0 {
			picked = append(picked, taken.Addr().(*net.TCPAddr).Port)
			return picked[0], nil
		}
		p, err := moto.FreePort()
		picked = append(picked, p)
		return p, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	l, err := startOnFreePorts(ctx, Options{Root: root, StateDir: t.TempDir(), APIAddr: "127.0.0.1:0"}, pick)
	if err != nil {
		t.Fatalf("start after a taken port: %v (ports tried %v)", err, picked)
	}
	defer l.Stop()
	if len(picked) != 2 {
		t.Fatalf("ports tried %v; want the taken one, then a free one", picked)
	}
}
