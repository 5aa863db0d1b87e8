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
	"github.com/runstwice/runstwice/internal/killpoint"
)

// TestMutatedRunnerBreaksTheLedger proves that the campaign can fail: with
// each guarantee of the runner removed on purpose (a chaos build told to
// skip the claim, the peek, the kill switch or the lease), a small campaign
// breaks the invariant that guarantee keeps. AWS faults and kills are off,
// so what breaks is the mutation's doing, not the weather's. The four
// campaigns run at once, each on its own stack.
func TestMutatedRunnerBreaksTheLedger(t *testing.T) {
	root, err := moto.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		mutation string
		broken   string
	}{
		{killpoint.NoClaim, chaos.InvExtra},
		{killpoint.NoPeek, chaos.InvExtra},
		{killpoint.IgnoreSwitch, chaos.InvFailClosed},
		{killpoint.NoLease, chaos.InvExtra},
	} {
		t.Run(tc.mutation, func(t *testing.T) {
			t.Parallel() // each campaign has its own stack; most of it is waiting
			l, err := chaos.Run(context.Background(), chaos.Config{Root: root, StateDir: t.TempDir(), N: 120, Seed: 7,
				Faults: "none", KillAt: "none", Mutations: []string{tc.mutation},
				Mix:       chaos.Mix{Twins: 0.15, Copies: 0.3, Delayed: 0.05},
				SESOutage: 3 * time.Second, Timeout: 6 * time.Minute, Log: io.Discard})
			if err != nil {
				t.Fatal(err)
			}
			var table bytes.Buffer
			l.Print(&table)
			for _, inv := range l.Invariants {
				if inv.Name == tc.broken {
					if inv.OK() {
						t.Fatalf("with %s, %q holds; the campaign cannot see the mutation:\n%s", tc.mutation, tc.broken, table.String())
					}
					t.Logf("with %s: %s: %d (%v)", tc.mutation, inv.Name, inv.Count, inv.IDs[:min(3, len(inv.IDs))])
					return
				}
			}
			t.Fatalf("the ledger has no invariant %q", tc.broken)
		})
	}
}
