//go:build integration

package jobs_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/dev/jobstest"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/message"
)

// opsWorld is the jobs fixture with the operator's lifecycle on its clock.
type opsWorld struct {
	*jobstest.World
	lifecycle *jobs.Lifecycle
}

func newOpsWorld(t *testing.T) opsWorld {
	t.Helper()
	w := opsWorld{World: jobstest.New(t)}
	w.lifecycle = jobs.NewLifecycle(w.Client, w.JobsTable)
	w.lifecycle.Now = w.Clock.Now
	return w
}

// TestReactivateKeepsTheKey: a redriven job is active again, so enqueue with
// AllowAfterFailed dedups onto it instead of admitting a twin.
func TestReactivateKeepsTheKey(t *testing.T) {
	w := newOpsWorld(t)
	ctx := context.Background()
	j := w.Failed(t, contract.Welcome.Name, "caller-a", "welcome:u-1")
	// Before: AllowAfterFailed would admit a twin (the bug a redrive must close).
	w.Clock.Advance(time.Hour)
	rv, err := w.lifecycle.Inspect(ctx, j.ID)
	if err != nil || !rv.Found || rv.State != jobs.StateFailed || rv.Superseded() || rv.Key != "welcome:u-1" {
		t.Fatalf("Inspect = %+v, %v", rv, err)
	}
	w.Counter.Reset()
	if err := w.lifecycle.Reactivate(ctx, rv, false); err != nil {
		t.Fatal(err)
	}
	if w.Counter.String() != "DynamoDB.TransactWriteItems=1" {
		t.Fatalf("reactivation took %s; want one transaction", w.Counter)
	}
	got := w.Get(t, j.ID)
	if got.State != jobs.StatePending || got.FailedAt != nil || !got.RunAt.Equal(w.Clock.Now()) || got.LastErrorClass != "" ||
		len(got.History) == 0 || got.History[0].Outcome != jobs.OutcomeDeadLettered {
		t.Fatalf("after Reactivate: %+v; want Pending, no failedAt, runAt now, the failure in its history only", got)
	}
	twin := jobs.Job{ID: message.NewMessageID(), Caller: "caller-a", Type: contract.Welcome.Name, Key: "welcome:u-1",
		Queue: string(contract.QueueDefault), Message: `{"v":1}`, CreatedAt: w.Clock.Now(), RunAt: w.Clock.Now()}
	w.Clock.Advance(jobs.DefaultPendingTimeout + time.Second)
	if d, err := w.Store.Reserve(ctx, twin, contract.AllowAfterFailed); err != nil || d.Job.ID != j.ID || d.Outcome == jobs.Reserved {
		t.Fatalf("enqueue of the same key while redriven (pending) = %v %s, %v; want the redriven job", d.Outcome, d.Job.ID, err)
	}
	if err := w.lifecycle.Settle(ctx, j.ID, true); err != nil {
		t.Fatal(err)
	}
	if got := w.Get(t, j.ID); got.State != jobs.StateEnqueued {
		t.Fatalf("after Settle(sent): %s; want Enqueued", got.State)
	}
	if d, err := w.Store.Reserve(ctx, twin, contract.AllowAfterFailed); err != nil || d.Outcome != jobs.Duplicate || d.Job.ID != j.ID {
		t.Fatalf("enqueue of the same key after the redrive = %v %s, %v; want Duplicate of the redriven job", d.Outcome, d.Job.ID, err)
	}
	// It lives like a new record: not Expired long after its first run time,
	// and the pointer lives as long (the key stays taken).
	w.Clock.Advance(jobs.QueueRetention - time.Hour)
	if got := w.Get(t, j.ID); got.State != jobs.StateEnqueued {
		t.Fatalf("%s after most of the queue retention; want Enqueued", got.State)
	}
	if d, _ := w.Store.Reserve(ctx, twin, contract.AllowAfterFailed); d.Outcome != jobs.Duplicate {
		t.Fatalf("twin admitted late in the redriven job's life: %v", d.Outcome)
	}
	// A second Reactivate (a rerun) writes nothing and is no error.
	rv, _ = w.lifecycle.Inspect(ctx, j.ID)
	w.Counter.Reset()
	if err := w.lifecycle.Reactivate(ctx, rv, false); err != nil || w.Counter.Get("DynamoDB.TransactWriteItems") != 0 {
		t.Fatalf("rerun: %v, %s", err, w.Counter)
	}
}

// TestSettleUnsent: a redrive whose send failed puts the job back to Failed
// with its error class; Settle never moves a job that is not Pending.
func TestSettleUnsent(t *testing.T) {
	w := newOpsWorld(t)
	ctx := context.Background()
	j := w.Failed(t, contract.Welcome.Name, "caller-a", "welcome:u-2")
	rv, _ := w.lifecycle.Inspect(ctx, j.ID)
	if err := w.lifecycle.Reactivate(ctx, rv, false); err != nil {
		t.Fatal(err)
	}
	if err := w.lifecycle.Settle(ctx, j.ID, false); err != nil {
		t.Fatal(err)
	}
	got := w.Get(t, j.ID)
	if got.State != jobs.StateFailed || got.FailedAt == nil || got.LastErrorClass != "max-receives" {
		t.Fatalf("after a failed send: %+v; want Failed with its class", got)
	}
	if err := w.lifecycle.Settle(ctx, j.ID, true); err != nil {
		t.Fatal(err)
	}
	if got := w.Get(t, j.ID); got.State != jobs.StateFailed {
		t.Fatalf("Settle moved a Failed job to %s", got.State)
	}
	// A stale Revival (it read Failed, the job is Succeeded now) is refused.
	other := w.Enqueue(t, contract.Welcome.Name, "caller-a", "welcome:u-3")
	stale := jobs.Revival{JobID: other.ID, Found: true, State: jobs.StateFailed, Caller: "caller-a", Type: contract.Welcome.Name, Key: "welcome:u-3"}
	if err := w.lifecycle.Reactivate(ctx, stale, false); !errors.Is(err, jobs.ErrStateChanged) {
		t.Fatalf("Reactivate of an Enqueued job read as Failed = %v; want ErrStateChanged", err)
	}
	if _, err := w.lifecycle.Inspect(ctx, message.NewMessageID()); err != nil {
		t.Fatalf("Inspect of an unknown job: %v; want not found without an error", err)
	}
}

// TestReactivateSuperseded: when a newer job took the key, the old job is
// superseded; a forced reactivation leaves the key with the newer job, and a
// newer job that takes the key between Inspect and Reactivate wins.
func TestReactivateSuperseded(t *testing.T) {
	w := newOpsWorld(t)
	ctx := context.Background()
	old := w.Failed(t, contract.Welcome.Name, "arn:aws:iam::1:user/a#b", "welcome:u-4")
	newer := w.Enqueue(t, contract.Welcome.Name, "arn:aws:iam::1:user/a#b", "welcome:u-4")
	rv, err := w.lifecycle.Inspect(ctx, old.ID)
	if err != nil || rv.SupersededBy != newer.ID {
		t.Fatalf("Inspect = %+v, %v; want superseded by %s", rv, err, newer.ID)
	}
	if err := w.lifecycle.Reactivate(ctx, rv, false); !errors.Is(err, jobs.ErrSuperseded) {
		t.Fatalf("Reactivate without force = %v; want ErrSuperseded", err)
	}
	if got := w.Get(t, old.ID); got.State != jobs.StateFailed {
		t.Fatalf("superseded job moved to %s without force", got.State)
	}
	if err := w.lifecycle.Reactivate(ctx, rv, true); err != nil {
		t.Fatal(err)
	}
	if got := w.Get(t, old.ID); got.State != jobs.StatePending {
		t.Fatalf("forced: %s; want Pending", got.State)
	}
	if rv, _ := w.lifecycle.Inspect(ctx, old.ID); rv.SupersededBy != newer.ID {
		t.Fatalf("forced reactivation took the key from the newer job: %+v", rv)
	}

	// The race: Inspect saw the key free, then a newer job took it.
	racer := w.Failed(t, contract.Welcome.Name, "caller-b", "welcome:u-5")
	rv, _ = w.lifecycle.Inspect(ctx, racer.ID)
	w.Enqueue(t, contract.Welcome.Name, "caller-b", "welcome:u-5")
	if err := w.lifecycle.Reactivate(ctx, rv, false); !errors.Is(err, jobs.ErrSuperseded) {
		t.Fatalf("Reactivate after the key was taken = %v; want ErrSuperseded", err)
	}
	if got := w.Get(t, racer.ID); got.State != jobs.StateFailed {
		t.Fatalf("the losing reactivation wrote the record: %s", got.State)
	}
}
