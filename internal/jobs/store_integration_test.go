//go:build integration

package jobs_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/dev/jobstest"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/message"
)

func TestReserveLifecycle(t *testing.T) {
	f := jobstest.New(t)
	ctx := context.Background()
	j := f.Job(contract.Welcome.Name, "caller-a", "welcome:u-1", 0)

	d, err := f.Store.Reserve(ctx, j, contract.AllowAfterFailed)
	if err != nil || d.Outcome != jobs.Reserved {
		t.Fatalf("Reserve = %v, %v; want reserved", d.Outcome, err)
	}
	got, err := f.Store.Get(ctx, j.ID)
	if err != nil || got.State != jobs.StatePending || got.Caller != "caller-a" || got.Message == "" {
		t.Fatalf("Get pending = %+v, %v", got, err)
	}
	// The owner retrying (a new try of the request, moments later) finds
	// its own pending job.
	f.Clock.Advance(time.Millisecond)
	retry := j
	retry.CreatedAt, retry.RunAt = f.Clock.Now(), f.Clock.Now()
	if d, err := f.Store.Reserve(ctx, retry, contract.AllowAfterFailed); err != nil || d.Outcome != jobs.Resume || !d.Own {
		t.Fatalf("own retry = %+v, %v; want own resume", d, err)
	}
	// Another request for the key waits while the job is fresh, then resumes it.
	other := f.Job(contract.Welcome.Name, "caller-a", "welcome:u-1", 0)
	if d, err := f.Store.Reserve(ctx, other, contract.AllowAfterFailed); err != nil || d.Outcome != jobs.Busy || d.RetryAfter <= 0 {
		t.Fatalf("other while pending = %+v, %v; want busy", d, err)
	}
	f.Clock.Advance(jobs.DefaultPendingTimeout + time.Second)
	if d, err := f.Store.Reserve(ctx, other, contract.AllowAfterFailed); err != nil || d.Outcome != jobs.Resume || d.Own || d.Job.ID != j.ID {
		t.Fatalf("other after timeout = %+v, %v; want resume of %s", d, err, j.ID)
	}
	// The promotion stores the message as it was handed over (a scheduled
	// job's carries the trace of its hand-over).
	sent := j
	sent.Message = `{"v":1,"traceparent":"00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-01"}`
	if err := f.Store.Promote(ctx, sent); err != nil {
		t.Fatal(err)
	}
	if got, _ := f.Store.Get(ctx, j.ID); got.State != jobs.StateEnqueued || got.Message != sent.Message {
		t.Fatalf("after promote: %s, message %s; want Enqueued with the message sent", got.State, got.Message)
	}
	if d, err := f.Store.Reserve(ctx, other, contract.RejectAlways); err != nil || d.Outcome != jobs.Duplicate || d.Job.ID != j.ID {
		t.Fatalf("duplicate = %+v, %v", d, err)
	}
	// A lease makes it Processing, a claim Succeeded.
	if _, err := f.Markers.Lease(ctx, j.MarkerKey(), engine.Mark{Owner: "w1", Until: f.Clock.Now().Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if got, _ := f.Store.Get(ctx, j.ID); got.State != jobs.StateProcessing || got.Attempts != 1 {
		t.Fatalf("leased: %+v", got)
	}
	if _, err := f.Markers.Claim(ctx, j.MarkerKey(), engine.Mark{Owner: "w1"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := f.Store.Get(ctx, j.ID); got.State != jobs.StateSucceeded {
		t.Fatalf("claimed: %s", got.State)
	}
	if d, _ := f.Store.Reserve(ctx, other, contract.RejectAlways); d.Outcome != jobs.Rejected || d.Job.ID != j.ID {
		t.Fatalf("RejectAlways after success = %+v", d)
	}
	d, err = f.Store.Reserve(ctx, other, contract.RejectIfFailed)
	if err != nil || d.Outcome != jobs.Reserved || d.Job.ID != other.ID {
		t.Fatalf("RejectIfFailed after success = %+v, %v", d, err)
	}
}

func TestMarkFailed(t *testing.T) {
	f := jobstest.New(t)
	ctx := context.Background()
	j := f.Enqueue(t, contract.Welcome.Name, "caller-a", "welcome:u-2")
	if err := f.Recorder.MarkFailed(ctx, j.ID, jobs.Failure{Class: "transient", Reason: "failed on its final attempt (5)", Attempts: 5}); err != nil {
		t.Fatal(err)
	}
	f.Clock.Advance(time.Second)
	if err := f.Recorder.MarkFailed(ctx, j.ID, jobs.Failure{Class: "max\nreceives", Reason: "exceeded maxReceiveCount (5 receives)", Attempts: 5}); err != nil {
		t.Fatalf("second MarkFailed: %v; want nil (idempotent)", err)
	}
	got, err := f.Store.Get(ctx, j.ID)
	if err != nil || got.State != jobs.StateFailed || got.LastErrorClass != "max_receives" || got.Attempts != 5 || got.FailedAt == nil ||
		got.LastOutcome != jobs.OutcomeDeadLettered || got.LastReason != "exceeded maxReceiveCount (5 receives)" {
		t.Fatalf("failed job = %+v, %v", got, err)
	}
	// Promote never resurrects a failed job.
	if err := f.Store.Promote(ctx, j); err != nil {
		t.Fatal(err)
	}
	if got, _ := f.Store.Get(ctx, j.ID); got.State != jobs.StateFailed {
		t.Fatalf("promote overwrote Failed: %s", got.State)
	}
	if err := f.Recorder.MarkFailed(ctx, message.NewMessageID(), jobs.Failure{Class: "x"}); !errors.Is(err, jobs.ErrNotFound) {
		t.Fatalf("MarkFailed of unknown job = %v; want ErrNotFound", err)
	}
	// A failed record expires TerminalRetention later; reads honour it.
	f.Clock.Advance(jobs.TerminalRetention + time.Second)
	if _, err := f.Store.Get(ctx, j.ID); !errors.Is(err, jobs.ErrNotFound) {
		t.Fatalf("Get after retention = %v; want ErrNotFound", err)
	}
}

func TestExpired(t *testing.T) {
	f := jobstest.New(t)
	ctx := context.Background()
	j := f.Enqueue(t, contract.Welcome.Name, "caller-a", "welcome:u-3")
	f.Clock.Advance(jobs.QueueRetention + time.Minute)
	if got, err := f.Store.Get(ctx, j.ID); err != nil || got.State != jobs.StateExpired {
		t.Fatalf("after retention: %+v, %v", got, err)
	}
	if d, _ := f.Store.Reserve(ctx, f.Job(contract.Welcome.Name, "caller-a", "welcome:u-3", 0), contract.RejectAlways); d.Outcome != jobs.Rejected {
		t.Fatalf("RejectAlways after Expired = %v", d.Outcome)
	}
}

// TestReserveConcurrent: many requests reserving one key at once create one job.
func TestReserveConcurrent(t *testing.T) {
	f := jobstest.New(t)
	ctx := context.Background()
	const n = 12
	outcomes := make([]jobs.Decision, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			outcomes[i], errs[i] = f.Store.Reserve(ctx, f.Job(contract.Welcome.Name, "caller-a", "welcome:u-4", 0), contract.AllowAfterFailed)
		})
	}
	wg.Wait()
	reserved := 0
	for i, d := range outcomes {
		if errs[i] != nil {
			t.Fatalf("reserve %d: %v", i, errs[i])
		}
		if d.Outcome == jobs.Reserved {
			reserved++
		} else if d.Outcome != jobs.Busy {
			t.Fatalf("reserve %d: %v; want reserved or busy", i, d.Outcome)
		}
	}
	if reserved != 1 {
		t.Fatalf("%d reservations; want exactly 1", reserved)
	}
	t.Logf("AWS calls for %d concurrent reserves: %s", n, f.Counter)
}

// TestReserveCost: a new job is one write and no read; a dedup hit is the
// failed write (which returns the pointer) and one read of the job and its
// marker together.
func TestReserveCost(t *testing.T) {
	f := jobstest.New(t)
	ctx := context.Background()
	first := f.Job(contract.Welcome.Name, "caller-a", "welcome:u-5", 0)
	f.Reserve(t, first)
	t.Logf("AWS calls for a new reserve: %s", f.Counter)
	if f.Counter.Total() != 1 || f.Counter.Get("DynamoDB.TransactWriteItems") != 1 {
		t.Fatalf("calls: %s; want 1 TransactWriteItems and nothing else", f.Counter)
	}
	if err := f.Store.Promote(ctx, first); err != nil {
		t.Fatal(err)
	}
	f.Counter.Reset()
	if d, err := f.Store.Reserve(ctx, f.Job(contract.Welcome.Name, "caller-a", "welcome:u-5", 0), contract.AllowAfterFailed); err != nil || d.Outcome != jobs.Duplicate {
		t.Fatalf("dedup hit = %+v, %v", d, err)
	}
	t.Logf("AWS calls for a dedup hit: %s", f.Counter)
	if f.Counter.Total() != 2 || f.Counter.Get("DynamoDB.BatchGetItem") != 1 {
		t.Fatalf("calls: %s; want the failed transaction and 1 BatchGetItem", f.Counter)
	}
}

// A parked job reads Parked, never expires while it is parked, and keeps its
// key: no twin is admitted however long its switch stays off.
func TestParkedJobNeverExpiresIntoATwin(t *testing.T) {
	f := jobstest.New(t)
	ctx := context.Background()
	j := f.Enqueue(t, contract.Welcome.Name, "caller-a", "welcome:u-park")
	// Parked again and again (every park delay) for weeks.
	for day := range 4 * int(jobs.QueueRetention/(24*time.Hour)) {
		prev, err := f.Recorder.MarkParked(ctx, j.ID)
		if err != nil || (day > 0 && prev != jobs.StateParked) {
			t.Fatalf("park on day %d = %s, %v", day, prev, err)
		}
		f.Clock.Advance(24 * time.Hour)
	}
	got, err := f.Store.Get(ctx, j.ID)
	if err != nil || got.State != jobs.StateParked || got.LastOutcome != jobs.OutcomeParked {
		t.Fatalf("after weeks parked: %+v, %v; want Parked", got, err)
	}
	d, err := f.Store.Reserve(ctx, f.Job(contract.Welcome.Name, "caller-a", "welcome:u-park", 0), contract.AllowAfterFailed)
	if err != nil || d.Outcome != jobs.Duplicate || d.Job.ID != j.ID {
		t.Fatalf("a second enqueue of a parked key = %+v, %v; want a duplicate of the parked job", d, err)
	}
	// A parked job that is cancelled is not parked again.
	if _, err := f.Store.Cancel(ctx, j.ID, "caller-a"); err != nil {
		t.Fatal(err)
	}
	if prev, err := f.Recorder.MarkParked(ctx, j.ID); prev != jobs.StateCancelled || !errors.Is(err, jobs.ErrConflict) {
		t.Fatalf("park after cancel = %s, %v; want Cancelled and ErrConflict", prev, err)
	}
}

// Cancel writes the tombstone the workers see, and the record follows.
func TestCancel(t *testing.T) {
	f := jobstest.New(t)
	ctx := context.Background()
	j := f.Enqueue(t, contract.Welcome.Name, "caller-a", "welcome:u-cancel")
	if _, err := f.Store.Cancel(ctx, j.ID, "caller-b"); !errors.Is(err, jobs.ErrNotFound) {
		t.Fatalf("another caller's cancel = %v; want ErrNotFound", err)
	}
	for range 2 { // repeating it is a success
		got, err := f.Store.Cancel(ctx, j.ID, "caller-a")
		if err != nil || got.State != jobs.StateCancelled {
			t.Fatalf("cancel = %+v, %v", got, err)
		}
	}
	m, ok, _ := f.Markers.Peek(ctx, j.MarkerKey())
	if !ok || m.State != engine.StateCancelled {
		t.Fatalf("marker after cancel = %+v; want a tombstone", m)
	}
	if got, _ := f.Store.Get(ctx, j.ID); got.State != jobs.StateCancelled || got.LastOutcome != jobs.OutcomeCancelled {
		t.Fatalf("record after cancel = %+v", got)
	}
	// Cancelled is terminal: a new job may follow under AllowAfterFailed
	// and RejectIfFailed, not under RejectAlways.
	if d, _ := f.Store.Reserve(ctx, f.Job(contract.Welcome.Name, "caller-a", "welcome:u-cancel", 0), contract.RejectAlways); d.Outcome != jobs.Rejected {
		t.Fatalf("RejectAlways after Cancelled = %v", d.Outcome)
	}
	if d, _ := f.Store.Reserve(ctx, f.Job(contract.Welcome.Name, "caller-a", "welcome:u-cancel", 0), contract.RejectIfFailed); d.Outcome != jobs.Reserved {
		t.Fatalf("RejectIfFailed after Cancelled = %v", d.Outcome)
	}

	// What ran (or runs) cannot be cancelled.
	done := f.Job(contract.Welcome.Name, "caller-a", "welcome:u-done", 0)
	running := f.Job(contract.Welcome.Name, "caller-a", "welcome:u-running", 0)
	for _, x := range []jobs.Job{done, running} {
		f.Reserve(t, x)
	}
	if _, err := f.Markers.Claim(ctx, done.MarkerKey(), engine.Mark{}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Markers.Lease(ctx, running.MarkerKey(), engine.Mark{Owner: "w", Until: f.Clock.Now().Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	for x, want := range map[string]jobs.State{done.ID: jobs.StateSucceeded, running.ID: jobs.StateProcessing} {
		if got, err := f.Store.Cancel(ctx, x, "caller-a"); !errors.Is(err, jobs.ErrConflict) || got.State != want {
			t.Fatalf("cancel of a %s job = %s, %v; want ErrConflict", want, got.State, err)
		}
	}
}

// A no-op's reason is recorded on the job (starting, as TestReserveCost
// does, from a reserved job).
func TestRecordOutcome(t *testing.T) {
	f := jobstest.New(t)
	ctx := context.Background()
	j := f.Job(contract.Welcome.Name, "caller-a", "welcome:u-noop", 0)
	f.Reserve(t, j)
	if err := f.Recorder.RecordOutcome(ctx, j.ID, jobs.OutcomeNoop, "no mail needed: user not found"); err != nil {
		t.Fatal(err)
	}
	if got, _ := f.Store.Get(ctx, j.ID); got.LastOutcome != jobs.OutcomeNoop || got.LastReason != "no mail needed: user not found" {
		t.Fatalf("record = %+v", got)
	}
	if err := f.Recorder.RecordOutcome(ctx, message.NewMessageID(), jobs.OutcomeNoop, "x"); !errors.Is(err, jobs.ErrNotFound) {
		t.Fatalf("outcome of an unknown job = %v; want ErrNotFound", err)
	}
}

// A claim that failed after the effect (ClaimFailed): the record says
// Succeeded, at once (even while the worker's lease runs) and for good, with
// the reason; the job can no longer be cancelled, and a cancelled job is not
// revived by a stale worker's write.
func TestMarkUnclaimed(t *testing.T) {
	f := jobstest.New(t)
	ctx := context.Background()
	j := f.Job(contract.Welcome.Name, "caller-a", "welcome:u-unclaimed", 0)
	f.Reserve(t, j)
	if _, err := f.Markers.Lease(ctx, j.MarkerKey(), engine.Mark{Owner: "w1", Until: f.Clock.Now().Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	for range 2 { // a retry finds its own write
		if err := f.Recorder.MarkUnclaimed(ctx, j.ID, "the effect ran but its marker could not be written"); err != nil {
			t.Fatal(err)
		}
	}
	got, err := f.Store.Get(ctx, j.ID)
	if err != nil || got.State != jobs.StateSucceeded || got.LastOutcome != jobs.OutcomeClaimFailed {
		t.Fatalf("Get = %+v, %v; want Succeeded with lastOutcome claim-failed while the lease runs", got, err)
	}
	f.Clock.Advance(2 * jobs.QueueRetention)
	if got, _ := f.Store.Get(ctx, j.ID); got.State != jobs.StateSucceeded {
		t.Fatalf("later: %s; want still Succeeded", got.State)
	}
	if got, err := f.Store.Cancel(ctx, j.ID, "caller-a"); !errors.Is(err, jobs.ErrConflict) || got.State != jobs.StateSucceeded {
		t.Fatalf("Cancel = %s, %v; want ErrConflict, Succeeded", got.State, err)
	}

	cancelled := f.Job(contract.Welcome.Name, "caller-a", "welcome:u-unclaimed-cancelled", 0)
	if _, err := f.Store.Reserve(ctx, cancelled, contract.AllowAfterFailed); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Store.Cancel(ctx, cancelled.ID, "caller-a"); err != nil {
		t.Fatal(err)
	}
	if err := f.Recorder.MarkUnclaimed(ctx, cancelled.ID, "stale"); !errors.Is(err, jobs.ErrConflict) {
		t.Fatalf("MarkUnclaimed on a cancelled job = %v; want ErrConflict", err)
	}
	if got, _ := f.Store.Get(ctx, cancelled.ID); got.State != jobs.StateCancelled {
		t.Fatalf("cancelled job reads %s", got.State)
	}
}

// A job's history keeps every outcome once, in order: a park however often
// it is repeated (the record does not grow with it), the failure that
// overtook it, a cancel's reason; GET shows the outcome that set the state
// as lastOutcome and the others in history.
func TestHistoryKeepsEveryOutcomeOnce(t *testing.T) {
	f := jobstest.New(t)
	ctx := context.Background()
	parkedThenFailed := f.Enqueue(t, contract.Welcome.Name, "caller-a", "welcome:u-history")
	for range 3 {
		if _, err := f.Recorder.MarkParked(ctx, parkedThenFailed.ID); err != nil {
			t.Fatal(err)
		}
		f.Clock.Advance(15 * time.Minute)
	}
	for range 2 { // the runner marks it, then the dlq function again
		if err := f.Recorder.MarkFailed(ctx, parkedThenFailed.ID, jobs.Failure{Class: "permanent", Reason: "no such user", Attempts: 1}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := f.Store.Get(ctx, parkedThenFailed.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != jobs.StateFailed || got.LastOutcome != jobs.OutcomeDeadLettered || got.LastReason != "no such user" ||
		len(got.History) != 1 || got.History[0].Outcome != jobs.OutcomeParked || !got.History[0].At.Equal(f.Clock.Now().Add(-15*time.Minute).Truncate(time.Millisecond)) {
		t.Fatalf("Get = %s %s %q, history %+v; want Failed, dead-lettered, and the last park once before it", got.State, got.LastOutcome, got.LastReason, got.History)
	}
	stored := rawHistory(t, f, parkedThenFailed.ID)
	if len(stored) != 3 { // the park once, the failure twice (View shows it once)
		t.Fatalf("the record holds %d history entries after 3 parks and 2 failures: %v; want 3", len(stored), stored)
	}

	parkedThenCancelled := f.Enqueue(t, contract.Welcome.Name, "caller-a", "welcome:u-history-2")
	if _, err := f.Recorder.MarkParked(ctx, parkedThenCancelled.ID); err != nil {
		t.Fatal(err)
	}
	f.Clock.Advance(time.Minute)
	if _, err := f.Store.Cancel(ctx, parkedThenCancelled.ID, "caller-a"); err != nil {
		t.Fatal(err)
	}
	got, err = f.Store.Get(ctx, parkedThenCancelled.ID)
	if err != nil || got.LastOutcome != jobs.OutcomeCancelled || len(got.History) != 1 || got.History[0].Outcome != jobs.OutcomeParked {
		t.Fatalf("Get = %+v, %v; want cancelled with the park in its history", got, err)
	}
}

// rawHistory reads the history attribute of a job's record as stored.
func rawHistory(t *testing.T, f *jobstest.World, jobID string) []map[string]any {
	t.Helper()
	out, err := f.Client.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(f.JobsTable),
		Key: map[string]types.AttributeValue{jobs.AttrPK: &types.AttributeValueMemberS{Value: jobs.JobPK(jobID)}}, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	var item struct {
		History []map[string]any `dynamodbav:"history"`
	}
	if err := attributevalue.UnmarshalMap(out.Item, &item); err != nil {
		t.Fatal(err)
	}
	return item.History
}

// A batch is held by one try of its accept at a time: the try that wrote
// it holds it; another try is refused while that hold lasts (ErrBatchBusy)
// and takes it once the holder released it or its lease ran out; only the
// holder marks it accepted, and an accepted batch is taken by no one.
func TestBatchIsHeldByOneTryAtATime(t *testing.T) {
	f := jobstest.New(t)
	ctx := context.Background()
	b := jobs.Batch{ID: "b-1", Caller: "c", Fingerprint: "fp", CreatedAt: f.Clock.Now().UnixMilli(),
		TakenBy: "first", TakenUntil: f.Clock.Now().Add(jobs.BatchLease).UnixMilli()}
	first, err := f.Store.PutBatch(ctx, b, f.Clock.Now().Add(24*time.Hour))
	if err != nil || first.TakenBy != "first" {
		t.Fatalf("put: %+v, %v", first, err)
	}
	if busy, err := f.Store.TakeBatch(ctx, first, "retry"); !errors.Is(err, jobs.ErrBatchBusy) || busy.TakenBy != "first" || busy.TakenUntil != b.TakenUntil {
		t.Fatalf("a retry while the first try holds it: %v, held by %q until %d; want ErrBatchBusy and the first try's hold", err, busy.TakenBy, busy.TakenUntil)
	}
	if _, err := f.Store.TakeBatch(ctx, first, "first"); err != nil {
		t.Fatalf("the holder taking it again: %v", err)
	}
	if err := f.Store.ReleaseBatch(ctx, first); err != nil {
		t.Fatal(err)
	}
	retry, err := f.Store.TakeBatch(ctx, first, "retry")
	if err != nil {
		t.Fatalf("a retry after the first try released it: %v", err)
	}
	// The first try, released and overtaken, cannot mark it accepted; nor
	// can it release the retry's hold.
	if err := f.Store.AcceptBatch(ctx, first); err == nil {
		t.Fatal("a try that no longer holds the batch marked it accepted")
	}
	if err := f.Store.ReleaseBatch(ctx, first); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Store.TakeBatch(ctx, first, "finisher"); !errors.Is(err, jobs.ErrBatchBusy) {
		t.Fatalf("the finisher while the retry holds it: %v; want ErrBatchBusy", err)
	}
	// The retry dies; its lease runs out and the finisher takes over.
	f.Clock.Advance(jobs.BatchLease + time.Second)
	fin, err := f.Store.TakeBatch(ctx, retry, "finisher")
	if err != nil {
		t.Fatalf("the finisher after the retry's lease ran out: %v", err)
	}
	if err := f.Store.AcceptBatch(ctx, fin); err != nil {
		t.Fatal(err)
	}
	if got, err := f.Store.GetBatch(ctx, b.ID); err != nil || got.State != jobs.BatchAccepted {
		t.Fatalf("after the finisher: %+v, %v; want Accepted", got.State, err)
	}
	if _, err := f.Store.TakeBatch(ctx, fin, "late"); !errors.Is(err, jobs.ErrBatchBusy) {
		t.Fatalf("taking an accepted batch: %v; want ErrBatchBusy", err)
	}
	// A batch written before holds existed (no takenBy) is accepted, and
	// accepted again by a retry answered from it.
	old, err := f.Store.PutBatch(ctx, jobs.Batch{ID: "b-old", Caller: "c", Fingerprint: "fp"}, f.Clock.Now().Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := f.Store.AcceptBatch(ctx, old); err != nil {
			t.Fatalf("accepting a batch that has no hold: %v", err)
		}
	}
}
