// Package localapitest starts the whole local stack for a test that calls
// its API: moto on a free port, the functions under the runtime emulator,
// the gateway on a free loopback port, state in the test's temporary
// directory; stopped when the test ends. It fails the test when the stack
// cannot start (integration tests never skip).
package localapitest

import (
	"context"
	"testing"
	"time"

	"github.com/runstwice/runstwice/internal/dev/devstack"
	"github.com/runstwice/runstwice/internal/dev/moto"
)

// startTimeout bounds building the functions and provisioning the template.
const startTimeout = 5 * time.Minute

// Start starts the local stack for t.
func Start(t testing.TB) *devstack.Local {
	t.Helper()
	root, err := moto.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	l, err := devstack.StartOnFreePorts(ctx, devstack.Options{Root: root, StateDir: t.TempDir(), APIAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatalf("localapitest: the local stack did not start: %v", err)
	}
	t.Cleanup(l.Stop)
	return l
}
