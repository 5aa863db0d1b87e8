//go:build integration

package chaos

import (
	"context"
	"slices"
	"testing"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/dev/jobstest"
	"github.com/runstwice/runstwice/internal/jobs"
)

// The campaign's wait before the ledger judges (waitSettled) holds while
// an accepted job is neither sent nor decided: one Pending (its release's
// send failed, or its promotion was lost), or a continuation whose
// parent's end already decides it (the continuation sweep would, minutes
// on). A continuation whose parent still runs, or failed and may be
// redriven, is decided enough: it waits as it must.
func TestUndecidedNamesWhatOnlyAReleaseToComeWouldFinish(t *testing.T) {
	f := jobstest.New(t)
	ctx := context.Background()
	welcome := kinds[slices.IndexFunc(kinds, func(k kind) bool { return k.Type == contract.Welcome.Name })]
	var results []result
	accept := func(j jobs.Job) jobs.Job {
		results = append(results, result{Job: plannedJob{Kind: welcome}, Accepted: true, JobID: j.ID})
		return j
	}
	after := func(key, parent string, policy contract.AfterPolicy) jobs.Job {
		j := f.Job(welcome.Type, "c", key, 0)
		j.After, j.AfterPolicy = parent, policy
		d, err := f.Store.Reserve(ctx, j, contract.AllowAfterFailed)
		if err != nil || d.Outcome != jobs.Reserved {
			t.Fatalf("reserve %s: %v %v", key, d.Outcome, err)
		}
		return accept(d.Job)
	}
	done := accept(f.Enqueue(t, welcome.Type, "c", "done"))
	if _, err := f.Markers.Claim(ctx, done.MarkerKey(), engine.Mark{Owner: "w", Expires: engine.SettledUntil(f.Clock.Now(), done.RunAt, engine.DefaultRetention)}); err != nil {
		t.Fatal(err)
	}
	running := accept(f.Enqueue(t, welcome.Type, "c", "running"))
	failed := accept(f.Failed(t, welcome.Type, "c", "failed"))
	pending := accept(f.Reserve(t, f.Job(welcome.Type, "c", "pending", 0)))
	due := after("due", done.ID, contract.OnSucceeded)
	after("waits", running.ID, contract.OnAnyEnd)
	after("redrivable", failed.ID, contract.OnAnyEnd)

	open, err := undecided(ctx, f.Store, results)
	want := []string{due.ID, pending.ID}
	slices.Sort(want)
	if err != nil || !slices.Equal(open, want) {
		t.Fatalf("undecided = %v %v; want the Pending job and the continuation of the ended parent %v", open, err, want)
	}
	if _, err := f.Store.ReleaseContinuations(ctx, done.ID, func(context.Context, jobs.Job) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := f.Store.Promote(ctx, pending); err != nil {
		t.Fatal(err)
	}
	if open, err := undecided(ctx, f.Store, results); err != nil || len(open) != 0 {
		t.Fatalf("undecided = %v %v once released and sent; want none", open, err)
	}
}
