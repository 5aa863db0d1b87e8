//go:build integration

package devstack

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/runstwice/runstwice/internal/dev/lambdarie"
	"github.com/runstwice/runstwice/internal/dev/testenv"
)

// TestEmulatorPoolUnderImpatientCallers runs the slow echo function under
// aws-lambda-rie: a caller that gives up mid-invocation leaves the instance
// busy until its invocation ends, the next caller waits for it instead of
// landing on the busy emulator (which would crash it), and an emulator that
// dies is replaced by a fresh one.
func TestEmulatorPoolUnderImpatientCallers(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	rie, err := lambdarie.Binary(root)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	bin, err := lambdarie.Build(ctx, root, "internal/dev/lambdarie/testdata/echo", filepath.Join(t.TempDir(), "bootstrap"))
	if err != nil {
		t.Fatal(err)
	}
	p := EmulatorPool(1, lambdarie.Config{RIE: rie, Bootstrap: bin, FunctionName: "echo", Timeout: 10 * time.Second}, nil)
	defer p.Stop()
	if err := p.Warm(ctx); err != nil {
		t.Fatal(err)
	}
	impatient, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := p.Invoke(impatient, []byte(`{"say":"slow","slowMs":1500}`)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("impatient caller got %v; want its deadline", err)
	}
	for range 3 {
		body, err := p.Invoke(ctx, []byte(`{"say":"next"}`))
		if err != nil || !strings.Contains(string(body), `"said":"next"`) {
			t.Fatalf("next caller got %s, %v; want its own reply", body, err)
		}
	}
	var em *lambdarie.Emulator
	p.mu.Lock()
	for in := range p.all {
		em = in.(*lambdarie.Emulator)
	}
	p.mu.Unlock()
	if p.Size() != 1 || em.Exited() {
		t.Fatalf("pool has %d instances (exited: %v); want the one emulator, alive", p.Size(), em.Exited())
	}

	// The emulator dies (as a chaos kill would do it): the next call gets a
	// fresh one.
	if err := syscall.Kill(-em.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for !em.Exited() {
		time.Sleep(10 * time.Millisecond)
	}
	body, err := p.Invoke(ctx, []byte(`{"say":"fresh"}`))
	if err != nil || !strings.Contains(string(body), `"said":"fresh"`) {
		t.Fatalf("after the crash: %s, %v; want a fresh emulator's reply", body, err)
	}
	if p.Size() != 1 {
		t.Fatalf("pool has %d instances after the replacement; want 1", p.Size())
	}
}
