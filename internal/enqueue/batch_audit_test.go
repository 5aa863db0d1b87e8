//go:build integration

package enqueue_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/enqueue"
	"github.com/runstwice/runstwice/internal/idempotency"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/message"
)

// fillContinuations reserves n continuations of alice's job parent
// directly in the store, each with a key of its own.
func fillContinuations(t *testing.T, s *stack, parent string, n int) {
	t.Helper()
	now := s.clock.Now()
	for i := range n {
		j := jobs.Job{ID: message.NewMessageID(), Caller: alice, Type: welcome, Key: fmt.Sprintf("fill-%s-%d", parent[:8], i),
			Queue: string(contract.QueueDefault), Message: `{"v":1}`, CreatedAt: now, RunAt: now, After: parent}
		if d, err := s.jobs.Reserve(context.Background(), j, contract.AllowAfterFailed); err != nil || d.Outcome != jobs.Reserved {
			t.Fatalf("continuation %d of %s: %v %v", i, parent, d.Outcome, err)
		}
	}
}

// batchJobsExisting lists the indexes of the batch's derived job ids that
// have a record.
func batchJobsExisting(t *testing.T, s *stack, key string, n int) []int {
	t.Helper()
	var out []int
	for i := range n {
		if _, err := s.jobs.Get(context.Background(), enqueue.BatchJobID(alice, key, i)); err == nil {
			out = append(out, i)
		}
	}
	return out
}

// TestAuditBatchChainedOntoADeduplicatedJobIsAllOrNothing: a batch whose
// job 1 waits for "#0", where job 0 deduplicates onto an active job X of
// the caller that already has 100 continuations. refusesBatch counts the
// continuations only of parents named by job id, never of the job a
// "#<k>" turns out to be, so nothing refuses the batch before its item is
// written. Then job 2 (a new job) is reserved and sent, job 0 is X, and job
// 1's reservation is refused by X's full list (ErrTooManyContinuations):
// the accept answers 503, and so does every retry and every run of the
// finisher, forever. The batch stays Accepting with job 2 sent and
// running and job 1 never made: a partial batch, and a caller told 503
// (nothing done) although one of its jobs runs.
//
// A fix must guarantee that a batch is refused (409, nothing written) or
// completes: the 100 limit of a "#k" parent that deduplicates onto an
// existing job is checked before anything is sent, or a continuation the
// parent's list refuses once the item is written ends the batch in a
// stated way rather than leaving it partial.
func TestAuditBatchChainedOntoADeduplicatedJobIsAllOrNothing(t *testing.T) {
	s := newStack(t)
	ctx := context.Background()
	x := activeJob(t, s)
	fillContinuations(t, s, x.JobID, jobs.MaxContinuations)
	body := `{"jobs":[{"type":"email.welcome.v1","args":{"userId":"u-0"}},` +
		`{"type":"email.welcome.v1","args":{"userId":"u-1"},"after":"#0"},` +
		`{"type":"email.welcome.v1","args":{"userId":"u-2"}}]}`
	resp := call(t, s.h, postBatch("chained-dedup", body))
	fin := s.h.FinishBatch(ctx, enqueue.BatchID(alice, "chained-dedup"))
	b, berr := s.jobs.GetBatch(ctx, enqueue.BatchID(alice, "chained-dedup"))
	_, sent := s.receive(t, contract.QueueDefault)
	made := batchJobsExisting(t, s, "chained-dedup", 3)
	switch {
	case resp.StatusCode == http.StatusConflict && len(made) == 0 && len(sent) == 0 && berr != nil:
		return // refused whole: nothing made
	case resp.StatusCode == http.StatusAccepted && len(made) == 2:
		return // accepted: job 0 is X, jobs 1 and 2 exist
	}
	t.Fatalf("a batch chained onto a deduplicated job whose list is full answered %d (%s); its finisher: %v; "+
		"the batch is %q; jobs made %v, messages sent %d: partial (job 2 sent and running, job 1 never made) and never completes",
		resp.StatusCode, resp.Body, fin, b.State, made, len(sent))
}

// failComplete fails the next n Completes (the answer's transaction), as
// a DynamoDB outage or a crash just before it would.
type failComplete struct {
	enqueue.Idempotency
	n int
}

func (f *failComplete) Complete(ctx context.Context, lock idempotency.Lock, resp idempotency.Response, with ...idempotency.Companion) error {
	if f.n > 0 {
		f.n--
		return errors.New("DynamoDB unavailable")
	}
	return f.Idempotency.Complete(ctx, lock, resp, with...)
}

// TestAuditRetryOfABatchCutShortIsNotRefused: contract.md promises that
// a batch whose accept was cut short after its item was written completes,
// by its finisher "or the request's retry with the same key". But every
// try of the accept runs refusesBatch before it looks at the batch's item,
// and refusesBatch counts the batch's own, already reserved, continuation
// among its parent's: a parent with 99 continuations and a batch job after
// it is accepted the first time (99+1) and refused on the retry (100+1):
// 409 too-many-continuations, "no job was made". The job exists and waits,
// the first try's jobs are sent; the caller is told nothing was made and
// will send its jobs again under a new key: twins (a second job id for
// the same work). The same holds for the other pre-checks: a parent whose
// record expired (404), a job deduplicated onto an active job that has since
// ended under a rejecting duplicate policy (409).
//
// A fix must guarantee that a retry of a batch whose item exists (Accepting
// or Accepted) is answered from that batch (202 with its jobs), never
// refused by checks meant for a batch not yet written.
func TestAuditRetryOfABatchCutShortIsNotRefused(t *testing.T) {
	s := newStack(t)
	parent := mustBody(t, call(t, s.h, post(welcome, "parent", `{"args":{"userId":"u-0"}}`)), http.StatusAccepted)
	s.receive(t, contract.QueueDefault)
	fillContinuations(t, s, parent.JobID, jobs.MaxContinuations-1)
	body := `{"jobs":[{"type":"email.welcome.v1","args":{"userId":"u-1"}},` +
		`{"type":"email.welcome.v1","args":{"userId":"u-2"},"after":"` + parent.JobID + `"}]}`
	firstTryCutShort(t, s, "retried", body)
	if made := batchJobsExisting(t, s, "retried", 2); len(made) != 2 {
		t.Fatalf("after the first try jobs %v exist; want both (the batch's item is written, its jobs reserved)", made)
	}
	retry := call(t, s.h, postBatch("retried", body))
	if retry.StatusCode != http.StatusAccepted {
		t.Fatalf("the retry of a batch whose jobs all exist (job 0 sent, job 1 waiting) answered %d: %s", retry.StatusCode, retry.Body)
	}
}

// TestAuditBatchKeyReusedAfterItsAnswerExpiredIsRefusedWhole: a batch's
// item lives as its stored answer, a day; its jobs' records, under ids
// derived from the key and the index, live 19 days. An Idempotency-Key
// reused for another batch on day two (the single enqueue answers 422 for
// that) writes a fresh item, and then: a job whose derived id holds the
// first batch's job fails sameJob (ErrBatchMismatch), while the jobs whose
// ids are free (the new batch is longer) are reserved and sent. The accept
// answers 503, every retry and the finisher fail the same way for good:
// the new batch is partial (its job 1 runs, job 0 never does) and the
// caller is told to retry a request that can never succeed.
//
// A fix must guarantee that a reused key either replays the old batch or is
// refused whole (422 key-mismatch) with nothing of the new batch made or
// sent.
func TestAuditBatchKeyReusedAfterItsAnswerExpiredIsRefusedWhole(t *testing.T) {
	s := newStack(t)
	decodeBatch(t, call(t, s.h, postBatch("reused", welcomes(1, 1, false))), http.StatusAccepted)
	s.receive(t, contract.QueueDefault)
	s.clock.Advance(25 * time.Hour) // the answer and the batch's item are gone, its job's record is not
	resp := call(t, s.h, postBatch("reused", welcomes(10, 2, false)))
	_, sent := s.receive(t, contract.QueueDefault)
	rec, err := s.jobs.Get(context.Background(), enqueue.BatchJobID(alice, "reused", 1))
	if resp.StatusCode == http.StatusUnprocessableEntity && err != nil && len(sent) == 0 {
		return
	}
	t.Fatalf("a batch under a key reused after its answer expired answered %d (%s); its job 1: %s %v, messages sent %d: "+
		"want 422 with nothing made", resp.StatusCode, resp.Body, rec.State, err, len(sent))
}

// TestAuditBatchStatesOutliveNoJob: GET /v1/batches/{id} reads each job's
// state from its record, and reads a job without a record as Pending
// ("still being accepted"), even in an Accepted batch. The batch's item
// lives as long as its own jobs' last delivery (a job due in 300 days
// keeps it 319 days), but a job deduplicated onto an active job answers
// with that job, whose record lives from its own run time (19 days). Once
// that record is gone the batch says Pending for a job that succeeded
// months ago, and counts it under Pending, for the rest of the batch's
// life: a false state.
//
// A fix must guarantee that GET never says Pending for a job of an
// Accepted batch: a job whose record is gone reads as what is known (e.g.
// Expired, or a state meaning "no longer kept"), and the counts agree.
func TestAuditBatchStatesOutliveNoJob(t *testing.T) {
	s := newStack(t)
	ctx := context.Background()
	x := activeJob(t, s)
	later := s.clock.Now().Add(300 * 24 * time.Hour).Truncate(time.Second).Format(time.RFC3339)
	b := decodeBatch(t, call(t, s.h, postBatch("later", `{"jobs":[{"type":"email.welcome.v1","args":{"userId":"u-0"},"runAt":"`+later+`"}]}`)),
		http.StatusAccepted)
	if len(b.Jobs) != 1 || b.Jobs[0].JobID != x.JobID || !b.Jobs[0].Deduplicated {
		t.Fatalf("answer %+v; want job 0 deduplicated onto %s", b.Jobs, x.JobID)
	}
	if _, err := s.markers.Claim(ctx, jobs.Job{ID: x.JobID, Type: welcome}.MarkerKey(), engine.Mark{Owner: "w", Expires: engine.SettledUntil(s.clock.Now(), s.clock.Now(), engine.DefaultRetention)}); err != nil {
		t.Fatal(err)
	}
	s.clock.Advance(30 * 24 * time.Hour)
	g := decodeBatch(t, call(t, s.h, request(http.MethodGet, "/v1/batches/"+b.BatchID, "")), http.StatusOK)
	if g.Jobs[0].State == string(jobs.StatePending) || g.Counts[string(jobs.StatePending)] > 0 {
		t.Fatalf("GET of an Accepted batch 30 days on: job 0 (%s, succeeded on day 0) reads %s, counts %v: a false Pending",
			g.Jobs[0].JobID, g.Jobs[0].State, g.Counts)
	}
}

// beforeComplete runs hook before the first Complete (the batch's answer
// with its promotions).
type beforeComplete struct {
	enqueue.Idempotency
	hook func()
}

func (b *beforeComplete) Complete(ctx context.Context, lock idempotency.Lock, resp idempotency.Response, with ...idempotency.Companion) error {
	if b.hook != nil {
		b.hook()
		b.hook = nil
	}
	return b.Idempotency.Complete(ctx, lock, resp, with...)
}

// TestAuditBatchAnswerSaysWhatItsJobsAre: a job of a batch cancelled
// between its hand-over and the batch's answer (a DELETE of its derived id,
// which the caller can compute, or an operator's) makes the answer's
// transaction fail its promotion; completeBatch then promotes one by one
// (the cancelled job keeps its story) and stores the answer it had built
// before: the cancelled job "Enqueued". That answer is the 202 and is
// replayed for a day, while GET says Cancelled. The single enqueue handles
// the same race by answering what the record says (sendAndFinish,
// ErrCompanionFailed); the batch does not.
//
// A fix must guarantee that the batch's stored answer never says a job is
// queued when its record already says it was cancelled: after a failed
// promotion, re-read the states (or the failed ones) before storing.
func TestAuditBatchAnswerSaysWhatItsJobsAre(t *testing.T) {
	s := newStack(t)
	ctx := context.Background()
	first := enqueue.BatchJobID(alice, "cancelled-meanwhile", 0)
	idem := s.h.Idempotency
	s.h.Idempotency = &beforeComplete{Idempotency: idem, hook: func() {
		if _, err := s.jobs.Cancel(ctx, first, alice); err != nil {
			t.Errorf("cancel job 0 before the answer: %v", err)
		}
	}}
	b := decodeBatch(t, call(t, s.h, postBatch("cancelled-meanwhile", welcomes(1, 2, false))), http.StatusAccepted)
	s.h.Idempotency = idem
	got, err := s.jobs.Get(ctx, first)
	if err != nil || got.State != jobs.StateCancelled {
		t.Fatalf("job 0 reads %s %v; want Cancelled", got.State, err)
	}
	if b.Jobs[0].State != string(jobs.StateCancelled) {
		t.Fatalf("the batch's answer (202, replayed for a day) says job 0 is %s; its record says Cancelled", b.Jobs[0].State)
	}
}

// firstTryCutShort posts batch body under key with its answer's write
// failing: the first try, cut short after its jobs were made (503).
func firstTryCutShort(t *testing.T, s *stack, key, body string) {
	t.Helper()
	idem := s.h.Idempotency
	s.h.Idempotency = &failComplete{Idempotency: idem, n: 1}
	defer func() { s.h.Idempotency = idem }()
	if r := call(t, s.h, postBatch(key, body)); r.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("the first try, its answer's write failing: %d %s", r.StatusCode, r.Body)
	}
}

// activeJob enqueues a welcome job for u-0 (key "x") and takes its message
// off the queue: an active job a batch's job 0 of the same args
// deduplicates onto.
func activeJob(t *testing.T, s *stack) acceptedBody {
	t.Helper()
	x := mustBody(t, call(t, s.h, post(welcome, "x", `{"args":{"userId":"u-0"}}`)), http.StatusAccepted)
	s.receive(t, contract.QueueDefault)
	return x
}
