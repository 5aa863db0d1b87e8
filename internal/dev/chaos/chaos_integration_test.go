//go:build integration

package chaos_test

import (
	"bytes"
	"context"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runstwice/runstwice/internal/dev/chaos"
	"github.com/runstwice/runstwice/internal/dev/devstack"
	"github.com/runstwice/runstwice/internal/dev/moto"
	"github.com/runstwice/runstwice/internal/email/digest"
	"github.com/runstwice/runstwice/internal/killpoint"
)

// TestShortCampaignKeepsThePromise is the short chaos run of make test: a
// few hundred jobs across the four types through the whole local stack —
// AWS faults of every kind, function processes killed at step boundaries
// and from outside (the outbox relay, the fan-out mid-page), twins, copies,
// cancels, a switch flipped, SSM and SES away for a while, poisoned jobs,
// redrives, a share of the jobs through the outbox (some written twice,
// some refused by their transaction's condition), continuations of jobs
// killed, redriven, cancelled and copied, batches whose accept is killed
// mid-way, the weekly digest's
// fan-out ticked while off, twice at once and for two weeks of two pages —
// and every invariant of the ledger holds.
// Randomness is seeded and only invariants are asserted, never timings or
// counts that depend on them.
func TestShortCampaignKeepsThePromise(t *testing.T) {
	t.Parallel() // with the mutated campaigns: each has its own stack, mostly waiting
	// Kills twice as often as make chaos's default, so that a run of this
	// size surely kills some processes (about a dozen).
	l, err := chaos.Run(context.Background(), chaos.Config{Root: repoRoot(t), StateDir: t.TempDir(), N: 200, Seed: 1,
		KillAt:    "after-decode=0.02,after-lease=0.01,after-effect=0.02,after-claim=0.01,before-response=0.02,mid-batch=0.15",
		SESOutage: 15 * time.Second, Timeout: 15 * time.Minute, Log: io.Discard})
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
	case f.JobsAccepted+f.OutboxRefused != 200:
		t.Errorf("%d jobs accepted and %d refused on purpose; want 200 in all", f.JobsAccepted, f.OutboxRefused)
	case f.OutboxJobs == 0 || f.OutboxRewritten == 0 || f.OutboxRefused == 0 || f.Deliveries["outbox"] == 0:
		t.Errorf("the outbox carried %d jobs (%d written twice, %d refused, %d stream records relayed); want some of each",
			f.OutboxJobs, f.OutboxRewritten, f.OutboxRefused, f.Deliveries["outbox"])
	case f.WeeksOn != 2 || f.Digests != 2*f.WeeklyPartners || f.WeeklyPartners <= digest.PageSize || f.FanoutStates["Succeeded (skipped)"] != 1:
		t.Errorf("fan-out: %d weeks on, %d digests owed to %d partners, states %v; want two weeks of two pages and the tick while off skipped",
			f.WeeksOn, f.Digests, f.WeeklyPartners, f.FanoutStates)
	case f.Kills["outbox "+devstack.StepMidInvocation] == 0 || f.Kills["email "+devstack.StepMidInvocation] == 0:
		t.Errorf("kills %v; want the relay and a fan-out page killed mid-invocation", f.Kills)
	case f.DuplicatesInjected == 0 || f.TwinRequests == 0 || f.FrontFaults == 0 || f.Cancelled+f.CancelRefused == 0 || f.Delayed == 0:
		t.Errorf("the campaign did not do what its plan says: %+v", f)
	case f.Poisoned == 0 || f.FailedAtEnd == 0 || f.DeadLettered == 0 || f.Redriven == 0:
		t.Errorf("no job took the dead-letter path (poisoned %d, failed %d, dead-lettered %d, redriven %d)", f.Poisoned, f.FailedAtEnd, f.DeadLettered, f.Redriven)
	case f.Faults["throttle"] == 0 || f.Faults["down"] == 0:
		t.Errorf("faults %v; want throttles and outages", f.Faults)
	case f.Chain.Continuations == 0 || f.Chain.Ran == 0 || f.Chain.CancelledBy+f.Chain.Waiting == 0 || f.Chain.Batches == 0 || f.Chain.BatchJobs < 2*f.Chain.Batches:
		t.Errorf("continuations and batches: %+v; want continuations that ran and ones their parent's end refused, and batches", f.Chain)
	case f.LostInvocations == 0:
		t.Errorf("kills %v, no invocation lost; want processes killed", f.Kills)
	case f.Clock == nil || f.Clock.OffsetDays < 31+60+365+400 || f.Clock.Fates[chaos.FateCancelled] == 0 || f.Clock.Fates[chaos.FateRanNow] == 0 ||
		f.Clock.Repeats == 0 || f.Clock.Reaped == 0 || !f.Clock.SwitchedOff || f.Clock.OddIDs != 3 || f.Clock.RelayCases == 0:
		t.Errorf("the clock campaign did not do what its plan says: %+v", f.Clock)
	}
}

// TestMutatedRunnerBreaksTheLedger proves that the campaign can fail: with
// each guarantee of the runner removed on purpose (a chaos build told to
// skip the claim, the peek, the kill switch, the lease or a continuation's
// guard), a small campaign breaks the invariants that guarantee keeps
// (without the kill switch, the tick while the fan-out is off runs it,
// too; without its guard, a continuation its parent's end refuses runs). AWS faults and kills are off,
// so what breaks is the mutation's doing, not the weather's. The four
// campaigns run at once, each on its own stack.
func TestMutatedRunnerBreaksTheLedger(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	mix := chaos.Mix{Twins: 0.15, Copies: 0.3, Delayed: 0.05, Outbox: 0.1}
	// Continuations, some waiting for parents that are cancelled or can
	// never succeed: without its guard, a parent's end runs them all.
	chained := mix
	chained.After, chained.Cancel, chained.Poisoned = 0.3, 0.05, 0.03
	for _, tc := range []struct {
		mutations []string
		mix       chaos.Mix
		broken    []string
	}{
		{[]string{killpoint.NoClaim}, mix, []string{chaos.InvExtra}},
		{[]string{killpoint.NoPeek}, mix, []string{chaos.InvExtra}},
		// Two mutations in one run (each breaks its own invariant): one
		// stack less to wait for.
		{[]string{killpoint.IgnoreSwitch, killpoint.ContinuationUnguarded}, chained, []string{chaos.InvFailClosed, chaos.InvTickOff, chaos.InvContinuation}},
		// killpoint.NoLease is not among them: the runner runs the records
		// of one key one at a time in a batch (a copy sent with its job
		// lands in the same batch), and the local stack runs one invocation
		// at a time per queue, so no twin ever meets another for a lease to
		// stop. The engine's own tests prove the lease across invocations
		// (TestLeaseKeepsATwinOut, RunTwice's concurrent scenario).
	} {
		t.Run(strings.Join(tc.mutations, "+"), func(t *testing.T) {
			t.Parallel() // each campaign has its own stack; most of it is waiting
			l, err := chaos.Run(context.Background(), chaos.Config{Root: root, StateDir: t.TempDir(), N: 120, Seed: 7, NoClock: true,
				Faults: "none", KillAt: "none", Mutations: tc.mutations, WeeklyPartners: 3,
				Mix: tc.mix, SESOutage: 3 * time.Second, Timeout: 6 * time.Minute, Log: io.Discard})
			if err != nil {
				t.Fatal(err)
			}
			var table bytes.Buffer
			l.Print(&table)
			for _, name := range tc.broken {
				i := slices.IndexFunc(l.Invariants, func(inv chaos.Invariant) bool { return inv.Name == name })
				switch {
				case i < 0:
					t.Fatalf("the ledger has no invariant %q", name)
				case l.Invariants[i].OK():
					t.Fatalf("with %s, %q holds; the campaign cannot see the mutation:\n%s", tc.mutations, name, table.String())
				}
				inv := l.Invariants[i]
				t.Logf("with %s: %s: %d (%v)", tc.mutations, inv.Name, inv.Count, inv.IDs[:min(3, len(inv.IDs))])
			}
		})
	}
}

// TestClockMutationsBreakTheLedger proves that the clock campaign can fail:
// each mutation that removes a fix of the promise across time breaks the
// invariant that fix keeps, and each broken line names the scenario the
// mutation broke. The four share one run (a load of 20 jobs with no AWS
// faults or kills, then the clock campaign), since the invariants they
// break differ: guards back to their 30-day floor let a cancelled job and
// a job run now run again when their leftover schedules fire after the
// jump; a page skipped while its switch is off loses the second page's
// partners; without the sweep, the schedules of ended jobs stay; a relay
// that forgets makes a second job of an item relayed again.
func TestClockMutationsBreakTheLedger(t *testing.T) {
	t.Parallel() // its own stack, mostly waiting
	l, err := chaos.Run(context.Background(), chaos.Config{Root: repoRoot(t), StateDir: t.TempDir(), N: 20, Seed: 3,
		Faults: "none", KillAt: "none", Mutations: killpoint.ClockMutations, SESOutage: 3 * time.Second, Timeout: 10 * time.Minute, Log: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	var table bytes.Buffer
	l.Print(&table)
	for _, tc := range []struct{ mutation, invariant, names string }{
		{killpoint.ShortGuards, chaos.InvCancelledJump, "cancelled"},
		{killpoint.ShortGuards, chaos.InvTwiceJump, "ran-now"},
		{killpoint.SkipPages, chaos.InvDigestWeek, "no digest"},
		{killpoint.NoSweep, chaos.InvOrphans, "after the sweep"},
		{killpoint.RelayForgets, chaos.InvTwiceJump, "relay case"},
	} {
		i := slices.IndexFunc(l.Invariants, func(inv chaos.Invariant) bool { return inv.Name == tc.invariant })
		switch {
		case i < 0:
			t.Fatalf("the ledger has no invariant %q", tc.invariant)
		case !slices.ContainsFunc(l.Invariants[i].IDs, func(id string) bool { return strings.Contains(id, tc.names) }):
			t.Errorf("with %s, %q does not break for a job %s; the clock campaign cannot see the mutation", tc.mutation, tc.invariant, tc.names)
			continue
		}
		inv := l.Invariants[i]
		t.Logf("with %s: %s: %d (%v)", tc.mutation, inv.Name, inv.Count, inv.IDs[:min(3, len(inv.IDs))])
	}
	if t.Failed() {
		t.Log("\n" + table.String())
	}
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := moto.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}
