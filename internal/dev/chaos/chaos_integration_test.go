//go:build integration

package chaos_test

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"

	"github.com/runstwice/runstwice/internal/dev/chaos"
	"github.com/runstwice/runstwice/internal/dev/moto"
)

// TestShortCampaignKeepsThePromise is the short chaos run of make test: a
// few hundred jobs across the four types through the whole local stack —
// AWS faults of every kind, function processes killed at step boundaries,
// twins, copies, cancels, a switch flipped, SSM and SES away for a while,
// poisoned jobs, redrives — and every invariant of the ledger holds.
// Randomness is seeded and only invariants are asserted, never timings or
// counts that depend on them.
func TestShortCampaignKeepsThePromise(t *testing.T) {
	root, err := moto.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	l, err := chaos.Run(context.Background(), chaos.Config{Root: root, StateDir: t.TempDir(), N: 200, Seed: 1,
		SESOutage: 15 * time.Second, Timeout: 8 * time.Minute, Log: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	var table bytes.Buffer
	l.Print(&table)
	t.Log("\n" + table.String())
	if l.Failed() {
		t.Fatal("the campaign broke an invariant (see the ledger above)")
	}
	f := l.Figures
	switch {
	case f.JobsAccepted != 200:
		t.Errorf("%d jobs accepted; want 200", f.JobsAccepted)
	case f.DuplicatesInjected == 0 || f.TwinRequests == 0 || f.FrontFaults == 0 || f.Cancelled+f.CancelRefused == 0 || f.Delayed == 0:
		t.Errorf("the campaign did not do what its plan says: %+v", f)
	case f.Poisoned == 0 || f.FailedAtEnd == 0 || f.DeadLettered == 0 || f.Redriven == 0:
		t.Errorf("no job took the dead-letter path (poisoned %d, failed %d, dead-lettered %d, redriven %d)", f.Poisoned, f.FailedAtEnd, f.DeadLettered, f.Redriven)
	case f.Faults["throttle"] == 0 || f.Faults["down"] == 0:
		t.Errorf("faults %v; want throttles and outages", f.Faults)
	}
}
