//go:build integration

package jobs_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/dev/jobstest"
	"github.com/runstwice/runstwice/internal/jobs"
)

// TestAuditSweepNeverUnlistsAParentAContinuationJustJoined: the
// continuation sweep reads a parent's continuations, releases them, and
// then takes the parent off its list because "nothing waits for it any
// more". That unlist is unconditional. A continuation enqueued in between
// (its reservation lists it on the parent's continuations item and adds the
// parent to the sweep's list, which already holds it) whose enqueue then
// stops before its decision at once (a crash, a timeout; contract.md says
// the sweep decides "a continuation enqueued as its parent ended whose
// enqueue stopped before it decided") is left waiting for a parent that is
// no longer on the sweep's list. The parent's marker was on the stream
// long ago: nothing ever looks at it again. The continuation reads
// AwaitingContinuation until its 400 days are up and then vanishes: lost.
//
// A fix must guarantee that the sweep never takes a parent off its list
// while a continuation it did not decide is listed on it (e.g. unlist
// conditionally on the continuations item being the one it read: a
// version counter, or the set's size, written by attach).
func TestAuditSweepNeverUnlistsAParentAContinuationJustJoined(t *testing.T) {
	f := jobstest.New(t)
	ctx := context.Background()
	parent := f.Enqueue(t, "email.welcome.v1", "c", "parent")
	first := continuation(t, f, "c", "first", parent.ID, contract.OnSucceeded)
	succeed(t, f, parent)

	s := newSends()
	var late jobs.Job
	send := func(ctx context.Context, j jobs.Job) error {
		if j.ID == first.ID && late.ID == "" {
			// While the sweep releases the first continuation, a request
			// enqueues another after the same parent and stops right after
			// its reservation (before its own decision at once).
			late = continuation(t, f, "c", "late", parent.ID, contract.OnSucceeded)
		}
		return s.send(ctx, j)
	}
	if _, err := f.Store.SweepContinuations(ctx, send); err != nil {
		t.Fatal(err)
	}
	if s.count(first.ID) != 1 || late.ID == "" {
		t.Fatalf("the sweep sent the first continuation %d times; want once (and the late one reserved meanwhile)", s.count(first.ID))
	}
	// Every later sweep (the one that must decide the late continuation).
	for range 3 {
		f.Clock.Advance(5 * time.Minute)
		if _, err := f.Store.SweepContinuations(ctx, s.send); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.count(late.ID); n != 1 {
		got := f.Get(t, late.ID)
		t.Fatalf("a continuation reserved while the sweep released its (succeeded) parent was sent %d times by three later sweeps "+
			"and reads %s: the sweep took the parent off its list after the continuation joined it, so nothing will ever release it",
			n, got.State)
	}
}

// TestAuditAFailedMarkerAheadOfItsRecordKeepsOnSucceededWaiting: a parent
// whose marker says FAILED before its record does. Both writers of a
// FAILED marker write it first and mark the record Failed (failedAt) after:
// the dlq function (failMarker, then MarkFailed) and a worker whose
// claim-then-effect effect failed (failMarker, then its dead letter). The
// FAILED marker is on the markers stream at once, so the chain function
// can release the parent between the two writes (and certainly does when
// MarkFailed fails and waits for the letter's next delivery). The parent
// then reads Failed with no failedAt, and Judge treats a Failed parent
// without failedAt as one that can no longer be redriven: the OnSucceeded
// continuation is Cancelled ("ended Failed and can no longer be
// redriven"), for good. Its letter is in the DLQ for 14 days; the operator
// redrives it, the parent succeeds, and the continuation never runs.
//
// A fix must guarantee that an OnSucceeded continuation is cancelled only
// on evidence that its parent can no longer be redriven (a dropped letter,
// or a failedAt older than the DLQ's retention), never for a missing
// failedAt: a parent that reads Failed from its marker alone keeps its
// continuations waiting (the sweep sees the record later).
func TestAuditAFailedMarkerAheadOfItsRecordKeepsOnSucceededWaiting(t *testing.T) {
	f := jobstest.New(t)
	ctx := context.Background()
	parent := f.Enqueue(t, "email.welcome.v1", "c", "parent")
	child := continuation(t, f, "c", "child", parent.ID, contract.OnSucceeded)
	// The dlq function's first write: the marker says FAILED.
	if err := f.Markers.Fail(ctx, parent.MarkerKey(), engine.Mark{Expires: engine.SettledUntil(f.Clock.Now(), parent.RunAt, engine.DefaultRetention)}); err != nil {
		t.Fatal(err)
	}
	// The markers stream's record of it reaches the chain function.
	s := newSends()
	rep, err := f.Store.ReleaseContinuations(ctx, parent.ID, s.send)
	if err != nil {
		t.Fatal(err)
	}
	// The dlq function's second write: the record says Failed, redrivable.
	if err := f.Recorder.MarkFailed(ctx, parent.ID, jobs.Failure{Class: "max-receives", Attempts: 5}); err != nil {
		t.Fatal(err)
	}
	if got := f.Get(t, child.ID); got.State != jobs.StateAwaitingContinuation {
		t.Fatalf("the OnSucceeded continuation of a parent whose letter is in the DLQ (redrivable for 14 days) reads %s (%q), "+
			"release report %+v: the release ran between the FAILED marker and the record's failedAt and judged the parent "+
			"beyond redrive; after the redrive the parent succeeds and the continuation never runs", got.State, got.LastReason, rep)
	}
}

// TestAuditAContinuationOfAParkedParentOutlivesItsWait: a continuation
// and its parent's continuations item live lifetime.AwaitingRecord (400
// days) from its reservation, on the reasoning (lifetime.go, storage.md)
// that "the parent's record lives at most a year and 19 days". A parked
// parent does not: its record and pointer are renewed while it is parked,
// and "a parked job never expires". A parent whose kill switch stays off
// for more than 400 days outlives its continuation's guard: the
// continuation's record, its pointer and the parent's continuations item
// all expire while it waits; when the switch goes on and the parent
// succeeds, the release finds nothing to send. The continuation is lost to
// a TTL (and its key is free for a twin meanwhile).
//
// A fix must guarantee a waiting continuation outlives its parent however
// long the parent stays active (e.g. renew the continuation, its pointer and
// the continuations item when the parent's life is renewed, or give a
// waiting continuation no TTL and let its parent's end or the sweep give it
// one).
func TestAuditAContinuationOfAParkedParentOutlivesItsWait(t *testing.T) {
	f := jobstest.New(t)
	ctx := context.Background()
	parent := f.Enqueue(t, "email.welcome.v1", "c", "parent")
	child := continuation(t, f, "c", "child", parent.ID, contract.OnSucceeded)
	// The parent's switch is off: every delivery (every 15 minutes) parks
	// it again; one park every ten days stands for them.
	for day := 0; day <= 410; day += 10 {
		if _, err := f.Recorder.MarkParked(ctx, parent.ID); err != nil {
			t.Fatalf("day %d: park: %v", day, err)
		}
		f.Clock.Advance(10 * 24 * time.Hour)
	}
	if got := f.Get(t, parent.ID); got.State != jobs.StateParked {
		t.Fatalf("the parent reads %s; want Parked", got.State)
	}
	// The switch is on again: the parent runs and succeeds.
	succeed(t, f, parent)
	s := newSends()
	rep, err := f.Store.ReleaseContinuations(ctx, parent.ID, s.send)
	if err != nil {
		t.Fatal(err)
	}
	if s.count(child.ID) != 1 {
		_, gerr := f.Store.Get(ctx, child.ID)
		t.Fatalf("after its parent was parked 420 days and then succeeded, the continuation was sent %d times (release %+v; "+
			"its record: %v): it expired while it waited", s.count(child.ID), rep, errors.Unwrap(gerr))
	}
}

// TestAuditACancelledContinuationStaysCancelled: DELETE of a waiting
// continuation writes the tombstone first and the record (Cancelled) second.
// When the second write fails (a throttled UpdateItem: the DELETE answers
// 503) the caller's retry reads the job Cancelled (from the tombstone) and
// returns at once, so the record is never written: it still says
// AwaitingContinuation and stays on its parent's list. The tombstone lives
// 30 days from the cancel (its due is the continuation's creation), but a
// continuation can wait 400 days: when its parent ends after the tombstone
// expired, the release moves the record out of waiting and sends it, and
// no marker stops the worker. A job its caller cancelled (and saw
// Cancelled) runs, and GET says AwaitingContinuation again from day 30 on.
//
// A fix must guarantee that a continuation read Cancelled is never sent:
// the retry of a cancel finishes the record's write (and the detach), or the
// release checks the tombstone, or the tombstone of a waiting job lives as
// long as the job can wait.
func TestAuditACancelledContinuationStaysCancelled(t *testing.T) {
	f := jobstest.New(t)
	ctx := context.Background()
	parent := jobstest.Enqueue(t, f.Store, f.Job("email.welcome.v1", "c", "parent", 60*24*time.Hour))
	child := continuation(t, f, "c", "child", parent.ID, contract.OnSucceeded)
	// The first DELETE: its tombstone is written, its record's write fails.
	if _, err := f.Markers.Tombstone(ctx, child.MarkerKey(), child.Due()); err != nil {
		t.Fatal(err)
	}
	// The caller's retry of the DELETE.
	if got, err := f.Store.Cancel(ctx, child.ID, "c"); err != nil || got.State != jobs.StateCancelled {
		t.Fatalf("the retried cancel: %s %v; want Cancelled", got.State, err)
	}
	stored := f.Get(t, child.ID).Stored()
	// The parent runs when due, 60 days later, and succeeds.
	if sent, tomb := succeedLater(t, f, parent, child); sent > 0 && !tomb {
		t.Fatalf("a continuation cancelled (the retried DELETE answered Cancelled; its record stayed %s) was sent when its parent "+
			"succeeded 61 days later, and its tombstone has expired: its worker runs it; GET now says %s",
			stored, f.Get(t, child.ID).State)
	}
}

// succeedLater lets 61 days pass, the parent succeed (it was due in 60)
// and its end be released; it returns how often child was sent and
// whether a tombstone stands over it then.
func succeedLater(t *testing.T, f *jobstest.World, parent, child jobs.Job) (sent int, tomb bool) {
	t.Helper()
	f.Clock.Advance(61 * 24 * time.Hour)
	succeed(t, f, parent)
	s := newSends()
	if _, err := f.Store.ReleaseContinuations(context.Background(), parent.ID, s.send); err != nil {
		t.Fatal(err)
	}
	_, tomb, err := f.Markers.Peek(context.Background(), child.MarkerKey())
	if err != nil {
		t.Fatal(err)
	}
	return s.count(child.ID), tomb
}

// TestAuditARepeatedContinuationRequestFindsItsJob: the same continuation
// request sent again (same Idempotency-Key, so the same job id, and the
// same body) after its stored answer expired (a day) must be answered with
// its job, as any repeated request is (Reserve's own-record path:
// Duplicate, Own). But Reserve asks attachRefused before it looks at its
// own record, and the parent's check in the transaction fails once the
// parent's record expired (19 days after it was due), although the
// continuation was enqueued, released and sent while the parent lived: the
// answer is ErrParentNotFound (404 "the job it waits for is not found"),
// stored nowhere. The caller is told its job does not exist while it ran
// (or is running); a caller that then re-enqueues it without after gets a
// second job id for the same work.
//
// A fix must guarantee that a reservation whose own record exists is
// answered from that record (Duplicate/Resume, Own) whatever the parent's
// check says.
func TestAuditARepeatedContinuationRequestFindsItsJob(t *testing.T) {
	f := jobstest.New(t)
	ctx := context.Background()
	parent := f.Enqueue(t, "email.welcome.v1", "c", "parent")
	succeed(t, f, parent)
	f.Clock.Advance(18 * 24 * time.Hour) // the parent's record still lives, a day longer
	req := f.Job("email.welcome.v1", "c", "child", 0)
	req.After, req.AfterPolicy = parent.ID, contract.OnSucceeded
	d, err := f.Store.Reserve(ctx, req, contract.AllowAfterFailed)
	if err != nil || d.Outcome != jobs.Reserved {
		t.Fatalf("reserve the continuation: %v %v", d.Outcome, err)
	}
	s := newSends()
	if _, err := f.Store.ReleaseContinuations(ctx, parent.ID, s.send); err != nil || s.count(req.ID) != 1 {
		t.Fatalf("the continuation of a succeeded parent was sent %d times: %v", s.count(req.ID), err)
	}
	f.Clock.Advance(2 * 24 * time.Hour) // its answer is gone, and so is the parent's record
	again := req
	again.CreatedAt, again.RunAt = f.Clock.Now(), f.Clock.Now()
	d, err = f.Store.Reserve(ctx, again, contract.AllowAfterFailed)
	if err != nil || !d.Own || d.Job.ID != req.ID {
		got := f.Get(t, req.ID)
		t.Fatalf("the same continuation request, sent again two days after its job was enqueued, is answered %v %v, "+
			"although its job %s exists (%s): want its own job", d.Outcome, err, req.ID, got.State)
	}
}
