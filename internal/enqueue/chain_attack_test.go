//go:build integration

package enqueue_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/enqueue"
	"github.com/runstwice/runstwice/internal/jobs"
)

// racingRelease is the enqueue's jobs table with the chain function's
// release of the same parent running alongside the enqueue's own: the
// chain's release has moved the continuation out of waiting and is sending
// it when the enqueue's release reads it.
type racingRelease struct {
	enqueue.Jobs
	store *jobs.Store
}

func (r racingRelease) ReleaseContinuations(ctx context.Context, parentID string, send jobs.SendFunc) (jobs.ReleaseReport, error) {
	var rep jobs.ReleaseReport
	var err error
	ran := false
	_, cerr := r.store.ReleaseContinuations(ctx, parentID, func(ctx context.Context, j jobs.Job) error {
		if !ran {
			ran = true
			rep, err = r.Jobs.ReleaseContinuations(ctx, parentID, send) // the enqueue's, mid-send of the chain's
		}
		return send(ctx, j)
	})
	if !ran {
		return r.Jobs.ReleaseContinuations(ctx, parentID, send)
	}
	if cerr != nil {
		return rep, cerr
	}
	return rep, err
}

// TestAttackContinuationOfAnEndedParentIsNotAnsweredWaiting: contract.md
// promises that "a parent that has already ended when the continuation is
// enqueued decides at once: the answer is Enqueued (or Cancelled) rather
// than AwaitingContinuation". awaitAndFinish reads the state for its
// answer from its own release's report and re-reads the record only when
// the job is not in rep.Waiting; but ReleaseReport.Waiting also holds a
// continuation "another release is sending" (a Pending one within the
// pending timeout, or one whose moveAwaiting lost to another release: its
// stale read said AwaitingContinuation). A continuation enqueued while its
// parent's end reaches the chain function (the markers stream) is released
// by both; when the chain's wins, the 202 says AwaitingContinuation for a
// job that is already sent and Enqueued, and that answer is stored and
// replayed for a day. decideContinuations (a batch) has the same gap.
//
// A fix must guarantee that the answer never says AwaitingContinuation for
// a continuation whose parent had ended: re-read the record when the job
// is in Waiting while the parent is terminal.
func TestAttackContinuationOfAnEndedParentIsNotAnsweredWaiting(t *testing.T) {
	s := newStack(t)
	ctx := context.Background()
	parent := succeededRacing(t, s)
	got := mustBody(t, call(t, s.h, post(welcome, "child", `{"args":{"userId":"u-2"},"after":"`+parent+`"}`)), http.StatusAccepted)
	rec, err := s.jobs.Get(ctx, got.JobID)
	if err != nil {
		t.Fatal(err)
	}
	_, envs := s.receive(t, contract.QueueDefault)
	if got.State == string(jobs.StateAwaitingContinuation) {
		t.Fatalf("the continuation of a parent that had already succeeded is answered %s (stored, replayed for a day); "+
			"its record reads %s and %d message(s) were sent: the parent's end was decided at once, by the chain's release",
			got.State, rec.State, len(envs))
	}
}

// TestAttackBatchContinuationOfAnEndedParentIsNotAnsweredWaiting: the
// batch's decideContinuations has the gap of awaitAndFinish: a job its own
// release reports in Waiting because another release (the chain
// function's, for the same parent's end) is sending it keeps
// AwaitingContinuation in the batch's answer (202, replayed for a day, and
// kept in the batch's item), while the job is sent and Enqueued.
func TestAttackBatchContinuationOfAnEndedParentIsNotAnsweredWaiting(t *testing.T) {
	s := newStack(t)
	ctx := context.Background()
	parent := succeededRacing(t, s)
	b := decodeBatch(t, call(t, s.h, postBatch("chained", `{"jobs":[{"type":"email.welcome.v1","args":{"userId":"u-2"},"after":"`+parent+`"}]}`)),
		http.StatusAccepted)
	rec, err := s.jobs.Get(ctx, b.Jobs[0].JobID)
	if err != nil {
		t.Fatal(err)
	}
	if b.Jobs[0].State == string(jobs.StateAwaitingContinuation) {
		t.Fatalf("a batch's continuation of a parent that had already succeeded is answered %s; its record reads %s",
			b.Jobs[0].State, rec.State)
	}
}

// succeededRacing enqueues a job and claims its marker (it succeeded), and
// sets s's jobs table to race the chain function's release of its end
// against the enqueue's own; it returns the job's id.
func succeededRacing(t *testing.T, s *stack) string {
	t.Helper()
	parent := mustBody(t, call(t, s.h, post(welcome, "parent", welcomeU1)), http.StatusAccepted)
	s.receive(t, contract.QueueDefault)
	if _, err := s.markers.Claim(context.Background(), jobs.Job{ID: parent.JobID, Type: welcome}.MarkerKey(), "w", s.clock.Now()); err != nil {
		t.Fatal(err)
	}
	s.h.Jobs = racingRelease{Jobs: s.h.Jobs, store: s.jobs}
	return parent.JobID
}

// TestAttackBatchChainKeepsTheParentItAnswers: job 1 of a batch waits for
// "#0". finishBatch resolves "#0" to the job job 0 *is* on this try
// (b.Jobs[0].JobID) and reserves job 1 after it; the resolution is never
// stored in the batch's item until the batch is accepted. A try cut short
// after job 1's reservation (its answer's write fails: 503) leaves job 1
// waiting for the active job X that job 0 deduplicated onto. When X ends
// before the retry (or the finisher) — here the caller cancels it, and the
// chain function releases X's end — job 0's key is free, so the retry
// reserves job 0 as a new job of its own and sends it, while job 1's
// reservation finds its own record (still after X: sameJob compares only the
// fingerprint) and answers it as it stands. The 202 says job 0 is a new
// job and job 1 waits for it ("#0"); job 1 was in fact cancelled because X
// was ("the job it waits for, X, ended Cancelled"), and job 0 runs with
// nothing after it. Had X succeeded instead, job 1 would run at once, before
// the job 0 it waits for.
//
// The fix: the retry answers what the first try decided (job 0 is X, as
// job 1's record says), so job 1 waits for the job the answer names and
// reads Cancelled with it.
//
// A fix must guarantee that a batch's continuation waits for the job its
// batch's answer names for "#k": the resolution of "#k" is kept with the
// batch before its dependents are reserved and reused by every later try,
// or a job whose own record waits for another parent than the one resolved
// now is refused/reconciled rather than answered as it stands.
func TestAttackBatchChainKeepsTheParentItAnswers(t *testing.T) {
	s := newStack(t)
	ctx := context.Background()
	x := mustBody(t, call(t, s.h, post(welcome, "x", `{"args":{"userId":"u-0"}}`)), http.StatusAccepted)
	s.receive(t, contract.QueueDefault)
	body := `{"jobs":[{"type":"email.welcome.v1","args":{"userId":"u-0"}},` +
		`{"type":"email.welcome.v1","args":{"userId":"u-1"},"after":"#0"}]}`
	firstTryCutShort(t, s, "flip", body)
	job1 := enqueue.BatchJobID(alice, "flip", 1)
	if got, err := s.jobs.Get(ctx, job1); err != nil || got.After != x.JobID {
		t.Fatalf("after the first try job 1 reads %+v %v; want it waiting for %s (job 0 deduplicated onto it)", got.State, err, x.JobID)
	}
	// Before the retry, X ends: its caller cancels it, and the chain
	// function releases its end.
	if _, err := s.jobs.Cancel(ctx, x.JobID, alice); err != nil {
		t.Fatal(err)
	}
	if _, err := s.jobs.ReleaseContinuations(ctx, x.JobID, s.h.SendFunc()); err != nil {
		t.Fatal(err)
	}
	b := decodeBatch(t, call(t, s.h, postBatch("flip", body)), http.StatusAccepted)
	got, err := s.jobs.Get(ctx, job1)
	if err != nil {
		t.Fatal(err)
	}
	if got.After != b.Jobs[0].JobID {
		t.Fatalf("the batch's answer says job 0 is %s (deduplicated %t, %s) and job 1 (%s) waits for it (\"#0\"), but job 1 waits "+
			"for %s (the job job 0 deduplicated onto on the first try) and reads %s (%q): it never runs after job 0",
			b.Jobs[0].JobID, b.Jobs[0].Deduplicated, b.Jobs[0].State, b.Jobs[1].State, got.After, got.State, got.LastReason)
	}
	if got.State == jobs.StateCancelled && !jobs.State(b.Jobs[0].State).Terminal() {
		t.Fatalf("job 1 reads Cancelled (%q) although job 0 (%s) is active", got.LastReason, b.Jobs[0].State)
	}
	// The retry answers what the first try decided (job 0 is X, which its
	// caller cancelled, so job 1 is cancelled with it); it makes no job
	// beyond its answer.
	if own := enqueue.BatchJobID(alice, "flip", 0); b.Jobs[0].JobID != own {
		if stray, err := s.jobs.Get(ctx, own); err == nil {
			t.Fatalf("the retry made job 0 anew (%s, %s) although its answer says job 0 is %s", own, stray.State, b.Jobs[0].JobID)
		}
	}
	if _, envs := s.receive(t, contract.QueueDefault); len(envs) != 0 {
		t.Fatalf("the retry sent %d message(s); the first try's decisions stand and nothing is left to send", len(envs))
	}
}
